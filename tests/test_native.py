"""The engine's modules compiled with mypyc (sparkcep.native) are in use where set-up built them, and give what the
Python files give: the same outputs, dead letters, late events, errors and counts, over each example rule set."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from sparkcep import native
from sparkcep.simulate.devices import generate_devices
from sparkcep.simulate.orders import generate_orders
from sparkcep.simulate.transactions import generate_transactions

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
OFF = native.OFF_VARIABLE
# Lines no rule can take, each where a dead letter has to come from the compiled decoding and routing.
HOSTILE = ["not json", "{}", "[1, 2]", '{"event_type": "ORDER_CREATED"}', '{"occurred_at": "1 May"}', "\ufffd"]


def test_the_engine_runs_compiled_where_set_up_built_it() -> None:
    modules = [importlib.import_module(name) for name in native.MODULES]
    if os.environ.get(OFF, "").lower() in ("off", "0", "false", "no"):
        assert native.why_not() == f"{OFF}={os.environ[OFF]}"
        assert not any(native.compiled(module) for module in modules)
        return
    # scripts/setup builds the modules; the suite tests the compiled engine (and tests this file with it off).
    assert native.why_not() is None, native.why_not()
    assert [module.__name__ for module in modules if not native.compiled(module)] == []


def _generated(write: Callable[[Path], object]) -> Callable[[Path], list[str]]:
    def lines(directory: Path) -> list[str]:
        write(directory)
        return [text for path in sorted(directory.glob("part-*")) for text in path.read_text().splitlines()]

    return lines


def _pattern_workload(directory: Path) -> list[str]:
    """The pattern benchmark's events and ten processors of mixed shapes, small (bench/pattern_workload.py)."""
    spec = importlib.util.spec_from_file_location("pattern_workload", ROOT / "bench" / "pattern_workload.py")
    assert spec is not None and spec.loader is not None
    workload = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(workload)
    (directory / "rules.json").write_text(json.dumps(workload.rules()), encoding="utf-8")
    return list(workload.events(6_000, 300, seed=3))


WORKLOADS: dict[str, tuple[str | None, Callable[[Path], list[str]]]] = {
    "orders": ("orders.rules.json", _generated(lambda d: generate_orders(d, 4_000, 7, mean_gap_ms=300_000))),
    "devices": ("devices.rules.json", _generated(lambda d: generate_devices(d, 4_000, 7, devices=40))),
    "fraud": ("fraud.rules.json", _generated(lambda d: generate_transactions(d, 4_000, 7, pairs=50))),
    "patterns": (None, _pattern_workload),
}


def _run(rules: Path, events: Path, off: bool) -> dict[str, Any]:
    environment = {key: value for key, value in os.environ.items() if key != OFF}
    if off:
        environment[OFF] = "off"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "engine_run.py"), str(rules), str(events), "500"],
        capture_output=True, env=environment, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    found: dict[str, Any] = orjson.loads(done.stdout)
    return found


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_the_compiled_engine_gives_what_the_python_files_give(workload: str, tmp_path: Path) -> None:
    if native.why_not() is not None:
        pytest.skip(f"no compiled engine in this run: {native.why_not()}")
    rules_name, make = WORKLOADS[workload]
    lines = make(tmp_path)
    rules = EXAMPLES / rules_name if rules_name else tmp_path / "rules.json"
    step = max(1, len(lines) // len(HOSTILE))
    for number, text in enumerate(HOSTILE):
        lines.insert(number * step, text)
    lines.insert(len(lines) // 3, lines[len(lines) // 2])  # an exact copy of a later line, arriving first
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n", encoding="utf-8")
    compiled, python = _run(rules, events, off=False), _run(rules, events, off=True)
    assert compiled["compiled"] and not python["compiled"], (compiled["why_not"], python["why_not"])
    assert compiled["after"]["outputs"]  # the workload gives outputs at all
    assert len(compiled["before"]["dead"]) + len(compiled["after"]["dead"]) >= len(HOSTILE)
    assert compiled["before"] == python["before"]
    assert compiled["after"] == python["after"]


@pytest.mark.parametrize(
    ("driver_compiled", "worker_why", "warned"),
    [(True, None, False), (False, "SPARKCEP_NATIVE=off", False), (True, "no build of these sources in /x", True)],
)
def test_a_worker_that_runs_the_python_files_under_a_compiled_driver_says_so_once(
    driver_compiled: bool, worker_why: str | None, warned: bool, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setattr(native, "_why_not", [worker_why])
    monkeypatch.setattr(native, "_worker_checked", [False])
    differs = native.worker_differs(driver_compiled)
    assert (differs is not None) == warned
    with caplog.at_level("WARNING", logger="sparkcep.native"):
        native.check_worker(driver_compiled)
        native.check_worker(driver_compiled)  # a second task in the same worker: nothing more
    said = [record.getMessage() for record in caplog.records if record.name == "sparkcep.native"]
    assert said == ([f"sparkcep: {differs}"] if warned else [])
    if warned:
        assert "no build of these sources in /x" in said[0] and "python -m sparkcep.native_build" in said[0]


def test_a_build_asked_for_again_counts_as_the_newest_and_is_not_pruned(tmp_path: Path) -> None:
    from sparkcep import native_build

    target = tmp_path / native.digest()
    for module in native.MODULES:  # a complete build as extension_paths reads one: no compiler needed
        extension = target.joinpath(*module.split(".")).with_name(module.split(".")[-1] + native.SUFFIX)
        extension.parent.mkdir(parents=True, exist_ok=True)
        extension.write_bytes(b"")
    (target / native.COMPLETE).write_text("made by the test\n", encoding="utf-8")
    os.utime(target, (1_000_000, 1_000_000))
    others = [tmp_path / f"other-{number}" for number in range(4)]  # builds of other checkouts' sources
    for number, other in enumerate(others):
        other.mkdir()
        os.utime(other, (2_000_000 + number, 2_000_000 + number))
    assert native_build.build(tmp_path) == target  # found: nothing compiled
    native_build._prune(tmp_path, keep=others[0])  # another checkout's build was made next
    kept = sorted(path.name for path in tmp_path.iterdir())
    assert target.name in kept and len(kept) == 4  # others[1], the oldest of the rest, went instead
    assert others[1].name not in kept
