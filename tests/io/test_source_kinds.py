"""The source-kind table: a new source is one kind class plus its config model (sparkcep.io.source_kinds), and one
``open_sinks`` gives every run its sinks (sparkcep.io.sinks).

The throwaway kind, "parquet" (tests/parquet_source_kind.py), reads a directory of Parquet files with Spark's own
Parquet stream. It is registered for the duration of a test only; nothing in the package names it, yet a pipeline
file names it, the checks before Spark starts ask it, and a job runs over it to the oracle's complex events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from parquet_source_kind import PARQUET, ParquetSource, ParquetSourceConfig

from sparkcep.cli import preflight
from sparkcep.config import ConfigError, FilesSourceConfig, KafkaSourceConfig, load_config
from sparkcep.io.files import FileSource
from sparkcep.io.kafka.source import KafkaSource
from sparkcep.io.kafka.writer import KafkaBatchWriter
from sparkcep.io.sections import KafkaSinkConfig, Sinks
from sparkcep.io.sinks import open_sinks
from sparkcep.io.source_kinds import kind_of, register, registered, source_kind, source_kinds
from sparkcep.rules.model import load_rules
from sparkcep.runfiles.outputs import Outputs, read_all_outputs
from sparkcep.simulate import generate_orders
from sparkcep.spark.jobs import pipeline_job, pipeline_source, run_job
from sparkcep.storage import StorageError
from sparkcep.testing.compare import assert_matches_oracle

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "orders.rules.json"


def pipeline(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"source: {source}\nrules: {{file: {RULES}}}\nsinks: {{files: out}}\ncheckpoint: ck\n"
                    "trigger: until_caught_up\nbuckets: 4\n")  # fmt: skip
    return path


def parquet_input(tmp_path: Path, events: int) -> list[str]:
    """Orders as Parquet files, one per generated JSON-lines file; the lines in the generator's order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    generated = generate_orders(tmp_path / "jsonl", events, seed=11, files=2, mean_gap_ms=1_200_000)
    (tmp_path / "in").mkdir()
    lines = []
    for path in sorted(Path(file) for file in generated.files):
        mine = [line for line in path.read_text(encoding="utf-8").splitlines() if line]
        pq.write_table(pa.table({"value": mine}), tmp_path / "in" / f"{path.stem}.parquet")
        lines.extend(mine)
    return lines


# -- the throwaway kind, end to end ------------------------------------------------------------------------


@pytest.mark.spark
def test_a_registered_kind_runs_a_pipeline_file_to_the_oracles_events(spark: SparkSession, tmp_path: Path) -> None:
    lines = parquet_input(tmp_path, 1_500)
    with registered(PARQUET):
        config = load_config(pipeline(tmp_path, "{type: parquet, path: in}"))
        assert isinstance(config.source, ParquetSourceConfig) and config.source.path == str(tmp_path / "in")
        assert config.input_dir == str(tmp_path / "in")  # relative to the file, as the kind resolved it
        preflight.check_pipeline(config, preflight.Origin(tmp_path / "pipeline.yaml"), 1_000)
        job, _ = pipeline_job(config, load_rules(RULES), None)
        assert job.config.source == ParquetSource(str(tmp_path / "in"))
        result = run_job(job, spark)
    expected = assert_matches_oracle(read_all_outputs(tmp_path / "out"), load_rules(RULES), lines).outputs
    assert sum(record["event_type"] == "ALL_PARCELS_SHIPPED" for record in expected) > 10
    # The summary names the source by its kind and shows Spark's offsets of it as they are.
    summary = json.loads((tmp_path / "out" / "_summary.json").read_text())
    assert summary["source"]["type"] == "parquet" and summary["source"]["offsets"] == {"logOffset": 0}
    assert result.summary.this_run.records == len(lines)
    run = json.loads((tmp_path / "ck" / "sparkcep" / "run.json").read_text())
    assert "source" not in run and "file_reader" not in run  # nothing to measure a stopped job's lag by


def test_the_checks_before_spark_starts_are_the_kinds(tmp_path: Path) -> None:
    with registered(PARQUET):
        config = load_config(pipeline(tmp_path, "{type: parquet, path: missing}"))
        with pytest.raises(StorageError) as raised:
            preflight.check_pipeline(config, preflight.Origin(tmp_path / "pipeline.yaml"), 1_000)
    assert str(raised.value) == (
        f"{tmp_path / 'pipeline.yaml'}: source.path {tmp_path / 'missing'}: no such directory\nFix: check the path"
    )
    assert not (tmp_path / "out").exists() and not (tmp_path / "ck").exists()  # nothing created


def test_a_kind_is_a_type_of_the_pipeline_file_only_while_registered(tmp_path: Path) -> None:
    path = pipeline(tmp_path, "{type: parquet, path: in, paht: x}")
    known = r"field 'source.paht': expected a known field \(did you mean 'path'"
    with registered(PARQUET), pytest.raises(ConfigError, match=known):
        load_config(path)
    assert source_kind("parquet") is None and list(source_kinds()) == ["files", "kafka"]
    with pytest.raises(ConfigError, match=r"field 'source': expected a valid value, got \{'type': 'parquet'"):
        load_config(path)


def test_every_source_and_config_has_its_kind(tmp_path: Path) -> None:
    files = load_config(pipeline(tmp_path, "{type: files, path: in}"))
    kafka = load_config(pipeline(tmp_path, "{type: kafka, bootstrap_servers: 'b:9092', topics: [t]}"))
    assert isinstance(files.source, FilesSourceConfig) and isinstance(kafka.source, KafkaSourceConfig)
    assert kind_of(files.source) is kind_of(pipeline_source(files)) is source_kind("files")
    assert kind_of(kafka.source) is kind_of(pipeline_source(kafka)) is source_kind("kafka")
    assert isinstance(pipeline_source(files), FileSource) and isinstance(pipeline_source(kafka), KafkaSource)
    with pytest.raises(TypeError, match="expected one of the registered source kinds"):
        kind_of(object())
    with pytest.raises(ValueError, match="source kind 'files': expected a new name"):
        register(type(kind_of(files.source))())


def test_a_kind_knows_which_offsets_are_its_own() -> None:
    files, kafka = source_kind("files"), source_kind("kafka")
    assert files is not None and kafka is not None
    file_offsets = {"v": 1, "files": {"a.jsonl": [10, 10]}}
    assert files.own_offsets(file_offsets) == json.dumps(file_offsets, sort_keys=True)
    assert kafka.own_offsets(file_offsets) is None
    assert kafka.own_offsets({"t:0": 5, "now": 1}) == '{"t:0": 5}' and files.own_offsets({"t:0": 5}) is None
    source = FileSource("/in")
    assert files.starting_at(source, '{"files": {}}') == FileSource("/in", starting_offsets='{"files": {}}')
    assert files.starting_at(source, '{"t:0": 5}') is None


# -- sinks ---------------------------------------------------------------------------------------------------


class Extra:
    label = "extra"

    def wants(self, name: str) -> bool:
        return True

    def write_batch(self, batch_id: int, outputs: Outputs, key_fields: Any) -> int:
        return 0


def test_open_sinks_gives_the_files_then_kafka_then_a_callers_writers(tmp_path: Path) -> None:
    extra = Extra()
    only_files = open_sinks(Sinks(files=str(tmp_path / "out")), tmp_path / "ck")
    assert only_files.files.output.local_path == tmp_path / "out" and only_files.writers == ()
    sinks = Sinks(files=str(tmp_path / "out"), kafka=KafkaSinkConfig(bootstrap_servers="127.0.0.1:1"))
    opened = open_sinks(sinks, str(tmp_path / "ck"), (extra,))
    kafka, last = opened.writers
    assert isinstance(kafka, KafkaBatchWriter) and last is extra
    # One sink id per checkpoint: a restart of the same job continues its commit markers.
    assert kafka.sink_id == open_sinks(sinks, str(tmp_path / "ck")).writers[0].sink_id  # type: ignore[attr-defined]
    assert kafka.sink_id != open_sinks(sinks, str(tmp_path / "ck2")).writers[0].sink_id  # type: ignore[attr-defined]
