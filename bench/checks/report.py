"""The report: medians per workload and code, Markdown tables with ratios, and the failures.

A value is the median over a code's successful runs; a code with failed runs says how many, and one whose runs
all failed shows FAILED instead of a value, so nothing that went wrong is averaged away.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from checks.runs import BASELINE, CURRENT, Run, median

Getter = Callable[[Run], float | None]


@dataclass(frozen=True)
class Metric:
    label: str
    get: Getter
    digits: int
    better: str  # "lower" or "higher": which way the ratio current/baseline is better


BOUNDED_METRICS = (
    Metric("wall s", lambda r: r.wall_s, 1, "lower"),
    Metric("events/s", lambda r: r.events_per_s, 0, "higher"),
    Metric("CPU µs/event", lambda r: r.cpu_us_per_event, 1, "lower"),
    Metric("peak RSS MB", lambda r: r.peak_rss_mb, 0, "lower"),
)
LIVE_METRICS = (
    Metric("p50 s", lambda r: r.extra.get("latency_s_p50"), 2, "lower"),
    Metric("p90 s", lambda r: r.extra.get("latency_s_p90"), 2, "lower"),
    Metric("max s", lambda r: r.extra.get("latency_s_max"), 2, "lower"),
    Metric("peak RSS MB", lambda r: r.peak_rss_mb, 0, "lower"),
)
DRAINED = Metric("drained s after stall", lambda r: r.extra.get("drained_s_after_stall"), 2, "lower")
WAITING = Metric("waiting at the resume", lambda r: r.extra.get("waiting_at_resume"), 0, "lower")


def of(runs: list[Run], workload: str, who: str) -> list[Run]:
    return [r for r in runs if r.workload == workload and r.who == who]


def value(runs: list[Run], get: Getter) -> float | None:
    """The median over the successful runs."""
    return median([v for v in (get(r) for r in runs if r.ok) if v is not None])


def number(found: float | None, digits: int) -> str:
    return "-" if found is None else f"{found:,.{digits}f}"


def cell(runs: list[Run], metric: Metric) -> str:
    if not runs:
        return "not run"
    if all(not r.ok for r in runs):
        return "FAILED"
    return number(value(runs, metric.get), metric.digits) + failed_share(runs)


def ratio(runs: list[Run], workload: str, metric: Metric) -> str:
    base = value(of(runs, workload, BASELINE), metric.get)
    current = value(of(runs, workload, CURRENT), metric.get)
    return f"{current / base:.2f}x" if base and current is not None else "-"


def same_cell(runs: list[Run]) -> str:
    if not runs:
        return "not run"
    ok = [r for r in runs if r.ok]
    if not ok:
        return "FAILED"
    differing = [r for r in ok if r.same_as_reference is False]
    if differing:
        return f"NO ({differing[0].difference})"
    if all(r.same_as_reference is None for r in ok):
        return "-"
    return "yes" + failed_share(runs)


def same_between_codes(runs: list[Run], workload: str) -> str:
    digests = {who: {r.digest for r in of(runs, workload, who) if r.ok} for who in (BASELINE, CURRENT)}
    if not digests[BASELINE] or not digests[CURRENT]:
        return "-"
    return "yes" if len(digests[BASELINE] | digests[CURRENT]) == 1 else "NO"


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def compared(metrics: tuple[Metric, ...]) -> list[str]:
    return [f"{m.label} {part}" for m in metrics
            for part in (BASELINE, CURRENT, f"ratio ({m.better} is better)")]  # fmt: skip


def compared_cells(runs: list[Run], workload: str, metrics: tuple[Metric, ...]) -> list[str]:
    cells: list[str] = []
    for metric in metrics:
        cells += [cell(of(runs, workload, who), metric) for who in (BASELINE, CURRENT)]
        cells.append(ratio(runs, workload, metric))
    return cells


def events(runs: list[Run], workload: str) -> str:
    return f"{next(r.events for r in runs if r.workload == workload):,}"


def bounded_table(runs: list[Run], workloads: list[str]) -> str:
    head = ["workload", "events", *compared(BOUNDED_METRICS), "same as reference: baseline",
            "same as reference: current", "same outputs, every run of both codes"]  # fmt: skip
    rows = [[name, events(runs, name), *compared_cells(runs, name, BOUNDED_METRICS),
             same_cell(of(runs, name, BASELINE)), same_cell(of(runs, name, CURRENT)), same_between_codes(runs, name)]
            for name in workloads]  # fmt: skip
    return table(head, rows)


def reference_table(runs: list[Run], workloads: list[str]) -> str:
    head = ["workload", "reference", "wall s", "events/s", "CPU µs/event", "peak RSS MB",
            "current events/s ÷ reference's", "baseline's ÷ reference's"]  # fmt: skip
    rows = []
    for name in workloads:
        mine = [r for r in runs if r.workload == name and r.who not in (BASELINE, CURRENT, "flink")]
        if not mine:
            continue
        speed = value(mine, BOUNDED_METRICS[1].get)
        versus = [value(of(runs, name, who), BOUNDED_METRICS[1].get) for who in (CURRENT, BASELINE)]
        rows.append([name, mine[0].who, *(cell(mine, m) for m in BOUNDED_METRICS),
                     *(f"{v / speed:.2f}x" if v and speed else "-" for v in versus)])  # fmt: skip
    return table(head, rows)


def live_table(runs: list[Run], workloads: list[str]) -> str:
    head = ["workload", "events", *compared(LIVE_METRICS), "inputs read: baseline", "inputs read: current",
            "backlog grew: baseline", "backlog grew: current"]  # fmt: skip
    rows = [[name, events(runs, name), *compared_cells(runs, name, LIVE_METRICS),
             *(files_read(of(runs, name, who)) for who in (BASELINE, CURRENT)),
             *(backlog(of(runs, name, who)) for who in (BASELINE, CURRENT))]
            for name in workloads]  # fmt: skip
    return table(head, rows)


def stalled(runs: list[Run], workloads: list[str]) -> list[str]:
    """The live workloads that ran with a stall."""
    return [name for name in workloads if any("stall_s" in r.extra for r in runs if r.workload == name)]


def stall_note(runs: list[Run], workloads: list[str]) -> str:
    """What a stall changes in the live table's figures."""
    seconds = sorted({r.extra["stall_s"] for r in runs if r.workload in workloads and "stall_s" in r.extra})
    stalls = ", ".join(f"{found:g} s" for found in seconds)
    return (f"With a stall ({stalls}: the job's whole process tree stopped with SIGSTOP after a third of the live "
            "inputs, inputs arriving meanwhile), the latencies and the backlog's growth are over the inputs placed "
            "outside the stall: those placed during it wait by construction.")  # fmt: skip


def stall_table(runs: list[Run], workloads: list[str]) -> str:
    head = ["workload", "stall s", "inputs placed during the stall", "waiting at the resume: baseline",
            "waiting at the resume: current", *compared((DRAINED,))]  # fmt: skip
    rows = []
    for name in workloads:
        ok = [r for r in runs if r.workload == name and r.ok and "stall_s" in r.extra]
        during = sorted({r.extra["stall_inputs"] for r in ok})
        waiting = [cell(of(runs, name, who), WAITING) for who in (BASELINE, CURRENT)]
        drained = [drained_cell(of(runs, name, who)) for who in (BASELINE, CURRENT)]
        rows.append([name, f"{ok[0].extra['stall_s']:g}" if ok else "-", "/".join(map(str, during)) or "-",
                     *waiting, *drained, ratio(runs, name, DRAINED)])  # fmt: skip
    return table(head, rows)


def drained_cell(runs: list[Run]) -> str:
    """The median seconds from the resume to the output of the last input placed during the stall; NOT DRAINED
    when a round never output it (within the time the check waits)."""
    never = sum(1 for r in runs if r.ok and r.extra.get("stall_s") and r.extra["drained_s_after_stall"] is None)
    return f"NOT DRAINED ({never}/{len(runs)})" if never else cell(runs, DRAINED)


def files_read(runs: list[Run]) -> str:
    """The fewest files any round read."""
    ok = [r for r in runs if r.ok]
    if not ok:
        return "FAILED" if runs else "not run"
    return f"{min(r.extra['live_files_processed'] for r in ok)}/{ok[0].extra['live_files']}{failed_share(runs)}"


def backlog(runs: list[Run]) -> str:
    """Whether a backlog grew in any round, and how much in the worst."""
    ok = [r for r in runs if r.ok]
    if not ok:
        return "FAILED" if runs else "not run"
    grew = [r for r in ok if r.extra["backlog_grew"]]
    if not grew:
        return f"no{failed_share(runs)}"
    worst = max(grew, key=lambda r: r.extra["latency_growth_s"])
    found = f"+{worst.extra['latency_growth_s']} s, {worst.extra['unread_files']} unread"
    return f"YES ({found}){failed_share(runs)}"


def failed_share(runs: list[Run]) -> str:
    failed = sum(1 for r in runs if not r.ok)
    return f" ({failed}/{len(runs)} FAILED)" if failed else ""


def flink_table(runs: list[Run]) -> str:
    peer = [r for r in runs if r.who == "flink"]
    head = ["workload", "events", "PyFlink wall s", "events/s", "CPU µs/event", "peak RSS MB", "same alerts as oracle",
            "current events/s ÷ PyFlink's", "baseline's ÷ PyFlink's"]  # fmt: skip
    speed = value(peer, BOUNDED_METRICS[1].get)
    versus = [value(of(runs, "orders", who), BOUNDED_METRICS[1].get) for who in (CURRENT, BASELINE)]
    row = ["orders", f"{peer[0].events:,}", *(cell(peer, m) for m in BOUNDED_METRICS), same_cell(peer),
           *(f"{v / speed:.1f}x" if v and speed else "-" for v in versus)]  # fmt: skip
    return table(head, [row])


def failures(runs: list[Run]) -> str:
    lines = [f"- {r.workload}, {r.who}, round {r.round + 1}: {r.error} (log: {r.log})" for r in runs if not r.ok]
    return "\n".join(lines)
