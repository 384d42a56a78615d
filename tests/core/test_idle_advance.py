"""Time that keeps moving when input stops (``--idle-advance``), without Spark: the advance control record, the
driver's decision (sparkcep.core.idle) fed wall-clock times and batch facts, the reading of Spark's progress,
and the option's checks in pipeline files and on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sparkcep.cli.app import main
from sparkcep.config import ConfigError, load_config
from sparkcep.core.control import (
    ADVANCE_FIELD,
    CONTROL_FIELD,
    AdvanceRecord,
    advance_record,
    flush_record,
    read_advance_record,
    read_rules_record,
    rules_record,
)
from sparkcep.core.idle import BatchFacts, IdleClock
from sparkcep.core.program import CONTROL, Program
from sparkcep.runfiles.outputs import BatchMetrics
from sparkcep.spark.idle import advance_times, facts_from_progress, known_watermark
from sparkcep.timeutil import parse_event_time

from helpers import COMPLETION_RULE, T0, ruleset

SECOND = 1_000
NOW = 1_795_000_000_000  # a wall clock: event times (T0, 2024) and the wall clock need not be close
DELAY = 5 * SECOND


# -- the record ----------------------------------------------------------------------------------------


def test_an_advance_record_carries_its_watermark_plus_the_delay_as_event_time_and_round_trips() -> None:
    advance = AdvanceRecord(watermark=T0 + 60 * SECOND, idle_ms=61 * SECOND, wall_clock=NOW)
    line = advance_record("eventTime", advance, DELAY)
    record = json.loads(line)
    assert record[CONTROL_FIELD] == "advance"
    assert record["eventTime"] == T0 + 65 * SECOND  # what Spark reads: the watermark then moves to T0 + 60 s
    assert read_advance_record(line) == advance
    # Read by its fields, whatever their order; other control records are no advance, and an advance is no rule log.
    reordered = json.dumps(dict(reversed(list(record.items()))))
    assert read_advance_record(reordered) == advance
    assert read_advance_record(flush_record("eventTime", T0)) is None
    assert read_advance_record(rules_record(0, 1, "{}")) is None
    assert read_rules_record(line) is None


def test_an_advance_is_a_control_record_like_a_flush_and_the_engine_takes_no_event_from_it() -> None:
    program = Program(ruleset(COMPLETION_RULE))
    line = advance_record(program.time_field, AdvanceRecord(T0, SECOND, NOW), DELAY)
    decoded = program.decode(line, CONTROL)
    assert decoded.event is None and decoded.dead == ()
    assert decoded == program.decode(flush_record(program.time_field, T0 + DELAY), CONTROL)


def test_a_time_field_named_like_the_records_own_fields_does_not_collide() -> None:
    line = advance_record("watermark", AdvanceRecord(T0, SECOND, NOW), DELAY)
    assert json.loads(line)["watermark"] == T0 + DELAY and json.loads(line)[ADVANCE_FIELD]["watermark"] == T0
    assert read_advance_record(line) == AdvanceRecord(T0, SECOND, NOW)


# -- the decision --------------------------------------------------------------------------------------


def input_batch(ended: int, max_event: int, watermark: int | None = None, rows: int = 10) -> BatchFacts:
    return BatchFacts(ended_ms=ended, input_rows=rows, watermark=watermark, max_event_time=max_event)


def test_no_advance_before_the_idle_time_has_passed_since_the_last_input() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW)
    clock.observe(input_batch(NOW + 10 * SECOND, max_event=T0 + 30 * SECOND))
    assert clock.watermark == T0 + 25 * SECOND  # Spark's next watermark: the largest event time minus the delay
    assert clock.due(NOW + 69 * SECOND) is None
    advance = clock.due(NOW + 70 * SECOND)
    assert advance == AdvanceRecord(T0 + 85 * SECOND, 60 * SECOND, NOW + 70 * SECOND)


def test_the_advance_covers_the_whole_idle_wall_time_not_just_the_option() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW)
    clock.observe(input_batch(NOW, max_event=T0))
    advance = clock.due(NOW + 95 * SECOND)  # the driver looked late (a slow poll): event time keeps pace anyway
    assert advance is not None and advance.watermark == T0 - DELAY + 95 * SECOND and advance.idle_ms == 95 * SECOND


def test_without_any_watermark_nothing_advances() -> None:
    clock = IdleClock(SECOND, DELAY, now_ms=NOW)
    clock.observe(BatchFacts(ended_ms=NOW, input_rows=0, watermark=None))  # Spark's "none yet" is 1970 (0)
    clock.observe(BatchFacts(ended_ms=NOW, input_rows=0, watermark=0))
    assert clock.due(NOW + 3_600 * SECOND) is None


def test_the_advances_own_batch_and_other_control_batches_are_not_input() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW)
    clock.observe(input_batch(NOW, max_event=T0 + DELAY, watermark=T0 - DELAY))
    first = clock.due(NOW + 60 * SECOND)
    assert first is not None and first.watermark == T0 + 60 * SECOND
    # The advance's batch (control lines only) and the no-data batch that ran with its watermark.
    clock.observe(BatchFacts(NOW + 61 * SECOND, input_rows=0, watermark=T0, max_event_time=first.watermark + DELAY))
    clock.observe(BatchFacts(NOW + 62 * SECOND, input_rows=0, watermark=first.watermark))
    assert clock.pending is None
    assert clock.due(NOW + 119 * SECOND) is None
    second = clock.due(NOW + 120 * SECOND)  # the next idle period runs from the first advance
    assert second == AdvanceRecord(T0 + 120 * SECOND, 60 * SECOND, NOW + 120 * SECOND)


def test_no_second_advance_while_the_first_is_on_its_way() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW)
    clock.observe(input_batch(NOW, max_event=T0 + DELAY))
    first = clock.due(NOW + 60 * SECOND)
    assert first is not None and clock.pending == first.watermark
    # Its batch was read (Spark knows the next watermark) but no batch has run with it: its timers have not fired.
    clock.observe(BatchFacts(NOW + 61 * SECOND, input_rows=0, watermark=T0, max_event_time=first.watermark + DELAY))
    assert clock.due(NOW + 200 * SECOND) is None
    clock.observe(BatchFacts(NOW + 201 * SECOND, input_rows=0, watermark=first.watermark))
    second = clock.due(NOW + 201 * SECOND)  # the wall time the slow batch took counts too
    assert second == AdvanceRecord(first.watermark + 141 * SECOND, 141 * SECOND, NOW + 201 * SECOND)


def test_input_restarts_the_idle_period_and_a_running_batch_postpones_the_advance() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW)
    clock.observe(input_batch(NOW, max_event=T0))
    clock.observe(input_batch(NOW + 50 * SECOND, max_event=T0 + 50 * SECOND))
    assert clock.due(NOW + 100 * SECOND) is None
    assert clock.due(NOW + 110 * SECOND, busy=True) is None  # a long batch may be reading input right now
    advance = clock.due(NOW + 111 * SECOND)
    assert advance is not None and advance.watermark == T0 + 45 * SECOND + 61 * SECOND
    # Input that lines no rule takes (dead letters, late events) is input all the same: a source not silent.


def test_facts_seen_again_or_out_of_order_change_nothing() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW)
    later, earlier = input_batch(NOW + 20 * SECOND, T0 + 20 * SECOND), input_batch(NOW + 10 * SECOND, T0)
    for facts in (later, earlier, later, earlier):
        clock.observe(facts)
    assert clock.watermark == T0 + 15 * SECOND
    assert clock.due(NOW + 79 * SECOND) is None and clock.due(NOW + 80 * SECOND) is not None


def test_a_restarted_run_starts_its_idle_period_at_its_start_from_the_watermark_it_had() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW, watermark=T0)  # the last run's watermark, from its checkpoint
    assert clock.due(NOW + 59 * SECOND) is None  # the job was down for hours: that is no idle time of this run
    assert clock.due(NOW + 60 * SECOND) == AdvanceRecord(T0 + 60 * SECOND, 60 * SECOND, NOW + 60 * SECOND)


def test_a_wall_clock_set_back_gives_no_advance() -> None:
    clock = IdleClock(60 * SECOND, DELAY, now_ms=NOW, watermark=T0)
    assert clock.due(NOW - 3_600 * SECOND) is None
    with pytest.raises(ValueError, match="idle_ms: expected a positive duration, got 0"):
        IdleClock(0, DELAY, now_ms=NOW)


# -- what the driver reads -----------------------------------------------------------------------------


def progress(
    timestamp: str, sources: dict[str, int], event_time: dict[str, str], duration: int = 250
) -> dict[str, object]:
    """The parts of a StreamingQueryProgress (as query.recentProgress gives it) the driver reads."""
    return {
        "timestamp": timestamp,
        "durationMs": {"triggerExecution": duration},
        "eventTime": event_time,
        "sources": [{"description": name, "numInputRows": rows} for name, rows in sources.items()],
    }


CONTROL_DIR = "/srv/ck/sparkcep/control"


def test_progress_of_an_input_batch_a_control_batch_and_an_idle_trigger() -> None:
    read = progress(
        "2026-11-25T16:27:19.698Z",
        {"FileStreamSource[file:/srv/in]": 2, f"FileStreamSource[file:{CONTROL_DIR}]": 0},
        {"max": "2024-01-01T00:00:00.500Z", "watermark": "1970-01-01T00:00:00.000Z"},
    )
    assert facts_from_progress(read, [CONTROL_DIR]) == BatchFacts(
        ended_ms=parse_event_time("2026-11-25T16:27:19.698Z") + 250,
        input_rows=2,
        watermark=None,
        max_event_time=T0 + 500,
    )
    control = progress(
        "2026-11-25T16:27:31.800Z",
        {"FileStreamSource[file:/srv/in]": 0, f"FileStreamSource[file:{CONTROL_DIR}]": 1},
        {"max": "2024-01-01T00:00:05.500Z", "watermark": "2023-12-31T23:59:59.500Z"},
    )
    facts = facts_from_progress(control, [CONTROL_DIR])
    assert facts.input_rows == 0 and facts.watermark == T0 - 500 and facts.max_event_time == T0 + 5_500
    idle = {"timestamp": "2026-11-25T16:27:43.600Z", "eventTime": {"watermark": "2024-01-01T00:00:04.500Z"},
            "sources": [{"description": "KafkaSource[orders]", "numInputRows": 0}]}  # fmt: skip
    assert facts_from_progress(idle, [CONTROL_DIR]) == BatchFacts(
        parse_event_time("2026-11-25T16:27:43.600Z"), 0, T0 + 4_500, None
    )


def test_a_restart_knows_the_watermark_from_the_metrics_and_the_advances_not_yet_read(tmp_path: Path) -> None:
    metrics = [BatchMetrics(0, max_read_time=T0 + DELAY), BatchMetrics(1, watermark=T0)]
    assert known_watermark(metrics, tmp_path, DELAY) == T0
    (tmp_path / f"advance-{T0 + 70 * SECOND}.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / f"advance-{T0 + 70 * SECOND}-1.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "flush-1.jsonl").write_text("{}\n", encoding="utf-8")
    assert sorted(advance_times(tmp_path, DELAY)) == [T0 + 65 * SECOND] * 2
    assert known_watermark(metrics, tmp_path, DELAY) == T0 + 65 * SECOND
    assert known_watermark([], tmp_path / "none", DELAY) is None


# -- the option --------------------------------------------------------------------------------------


BASE = "source: {type: files, path: in}\nrules: {file: r.json}\nsinks: {files: out}\ncheckpoint: ck\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_pipeline_file_reads_idle_advance_off_by_default(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, BASE)).idle_advance_ms is None
    assert load_config(write(tmp_path, BASE + "idle_advance: 1m\n")).idle_advance_ms == 60_000
    assert load_config(write(tmp_path, BASE + "idle_advance: 2500\n")).idle_advance_ms == 2_500


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("idle_advance: soon\n", "field 'idle_advance': expected a duration such as '30m' or '7d' (units d, h, m, "
                                 "ms, s, w), got 'soon'"),
        ("idle_advance: 0s\n", "field 'idle_advance': expected a positive duration, got '0s'"),
        ("idle_advance: 1s\ntrigger: 2s\n", "field 'idle_advance': expected a duration longer than the trigger (2s)"),
        ("idle_advance: 1m\ntrigger: until_caught_up\n", "field 'idle_advance': expected no idle_advance with trigger: "
                                                         "until_caught_up"),
    ],
)  # fmt: skip
def test_a_pipeline_files_idle_advance_errors_name_the_field_what_was_expected_and_what_came(
    tmp_path: Path, lines: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, BASE + lines))
    assert message in str(caught.value) and str(tmp_path / "pipeline.yaml") in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--idle-advance", "1m", "--until-caught-up"], "--idle-advance: expected a streaming run"),
        (["--idle-advance", "500ms"], "--idle-advance: expected a duration longer than --trigger-interval (1s)"),
        (["--idle-advance", "0s"], "--idle-advance: expected a positive duration, got 0ms"),
        (["--idle-advance", "soon"], "expected a duration such as '30m'"),
    ],
)
def test_the_command_line_refuses_idle_advance_where_it_cannot_work(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [COMPLETION_RULE]}), encoding="utf-8")
    args = ["run", "--rules", str(rules), "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ck"), *extra]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "ck").exists()  # refused before anything started


def test_with_a_pipeline_file_idle_advance_belongs_in_the_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--config", str(write(tmp_path, BASE)), "--idle-advance", "1m"])
    assert result.exit_code == 2 and "expected idle_advance in the pipeline file" in result.output
