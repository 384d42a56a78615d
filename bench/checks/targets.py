"""The issue's targets that one check can compute, judged on the current code (the baseline's figure beside it).

- orders: events/s (wall) at least 0.4x the oracle's, and at most 35 µs of CPU per event;
- every run of the current code: peak RSS of its process tree at most 3.2 GB (3,200 MB of 2^20 bytes);
- live (files and Kafka): an input's arrival to output, p90 at most 1.5 s (with a stall: over the inputs placed
  outside it);
- live with ``--stall``: the last input placed during the stall output at most 30 s after the resume ("after a 60
  s stall of the job, the backlog is gone within 30 s");
- PyFlink (when run): orders events/s at least 10x the peer's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from checks.report import BOUNDED_METRICS, DRAINED, LIVE_METRICS, Getter, of, stalled, value
from checks.runs import BASELINE, CURRENT, Run

EVENTS_PER_S = BOUNDED_METRICS[1].get
CPU_US = BOUNDED_METRICS[2].get
P90 = LIVE_METRICS[1].get
MIN_ORACLE_SHARE = 0.4
MAX_CPU_US = 35.0
MAX_RSS_MB = 3_200.0
MAX_P90_S = 1.5
MAX_DRAINED_S = 30.0
MIN_FLINK_FACTOR = 10.0
OTHERS = {"oracle": "the oracle's", "flink": "PyFlink's"}


def targets(runs: list[Run], live_workloads: list[str]) -> str:
    lines = [
        relative(runs, "oracle", MIN_ORACLE_SHARE),
        absolute(runs, "orders", "CPU µs/event", CPU_US, MAX_CPU_US),
        peak_rss(runs),
        *(absolute(runs, name, "p90 s", P90, MAX_P90_S) for name in live_workloads),
        *(drained(runs, name) for name in stalled(runs, live_workloads)),
    ]
    if any(r.who == "flink" for r in runs):
        lines.append(relative(runs, "flink", MIN_FLINK_FACTOR))
    return "**Targets** (the current code; the baseline in brackets):\n\n" + "\n".join(lines)


def judged(
    label: str,
    figures: tuple[float | None, float | None],
    passes: Callable[[float], bool],
    unit: str,
    where: tuple[str, str] = ("", ""),
) -> str:
    """``- label: figure PASS|FAIL (baseline figure)`` for (current, baseline) figures; ``where`` names a run."""
    current = figures[0]
    mine, theirs = (show(found, unit) + (f" ({run})" if run else "") for found, run in zip(figures, where, strict=True))
    if current is None:
        return f"- {label}: not measured (baseline {theirs})"
    return f"- {label}: {mine} {'PASS' if passes(current) else 'FAIL'} (baseline {theirs})"


def show(found: float | None, unit: str) -> str:
    if found is None:
        return "-"
    if found == math.inf:
        return "never"
    return f"{found:.2f}x" if unit == "x" else f"{found:,.2f}{unit}" if found < 100 else f"{found:,.0f}{unit}"


def relative(runs: list[Run], versus: str, least: float) -> str:
    """orders events/s of a code over those of the ``versus`` run (the oracle or the peer)."""
    label = f"orders events/s >= {least:g}x {OTHERS[versus]}"
    if not of(runs, "orders", versus):
        return f"- {label}: not run"
    other = value(of(runs, "orders", versus), EVENTS_PER_S)

    def share(who: str) -> float | None:
        mine = value(of(runs, "orders", who), EVENTS_PER_S)
        return mine / other if mine is not None and other else None

    return judged(label, (share(CURRENT), share(BASELINE)), lambda found: found >= least, "x")


def absolute(runs: list[Run], workload: str, what: str, get: Getter, most: float) -> str:
    label = f"{workload} {what} <= {most:g}"
    if not of(runs, workload, CURRENT):
        return f"- {label}: not run"
    figures = (value(of(runs, workload, CURRENT), get), value(of(runs, workload, BASELINE), get))
    return judged(label, figures, lambda found: found <= most, "")


def peak_rss(runs: list[Run]) -> str:
    """The largest peak over every successful run of a code, and which workload it was."""

    def largest(who: str) -> tuple[float | None, str]:
        found = [(r.peak_rss_mb, r.workload) for r in runs if r.who == who and r.ok and r.peak_rss_mb is not None]
        return max(found) if found else (None, "")

    (current, where), (base, base_where) = largest(CURRENT), largest(BASELINE)
    label = f"peak RSS MB <= {MAX_RSS_MB:,.0f} in every run"
    return judged(label, (current, base), lambda found: found <= MAX_RSS_MB, "", (where, base_where))


def drained(runs: list[Run], workload: str) -> str:
    """The stall's backlog gone in time: the median over the rounds; a round that never drained makes it never."""
    seconds = sorted({r.extra["stall_s"] for r in runs if r.workload == workload and "stall_s" in r.extra})
    stalls = ", ".join(f"{found:g} s" for found in seconds)
    label = f"{workload}: backlog drained within {MAX_DRAINED_S:g} s after a stall ({stalls})"
    figures = (drained_after(of(runs, workload, CURRENT)), drained_after(of(runs, workload, BASELINE)))
    return judged(label, figures, lambda found: found <= MAX_DRAINED_S, " s")


def drained_after(runs: list[Run]) -> float | None:
    """Seconds from the resume to the output of the last input placed during the stall (median over the rounds);
    infinite when a round never output it."""
    ok = [r for r in runs if r.ok and "stall_s" in r.extra]
    if any(r.extra["drained_s_after_stall"] is None for r in ok):
        return math.inf
    return value(ok, DRAINED.get)
