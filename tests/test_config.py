"""Pipeline configuration files: validation with named fields, secrets kept out, paths relative to the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcep.config import ConfigError, FilesSourceConfig, KafkaSourceConfig, load_config
from sparkcep.io.files import FileSource
from sparkcep.spark.jobs import pipeline_source

KAFKA = """
source:
  type: kafka
  bootstrap_servers: 127.0.0.1:9092
  topics: [orders, parcels]
  starting_offsets: "2024-01-01T00:00:00Z"
  max_records_per_batch: 50000
  backfill: {aligned: true, step: 10m}
  properties: {security.protocol: SASL_PLAINTEXT, sasl.username: cep, sasl.password: "env:KAFKA_PASSWORD"}
rules: {store: "postgresql://cep@127.0.0.1:5432/rules"}
sinks:
  files: out
  kafka: {bootstrap_servers: 127.0.0.1:9092, topic_prefix: "cep.", include: [_deadletter]}
  postgres: ["postgresql://cep@127.0.0.1:5432/alerts"]
checkpoint: ck
watermark_delay: 10s
trigger: until_caught_up
spark: {master: "local[2]", conf: {spark.ui.enabled: "false"}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_kafka_pipeline_file_becomes_source_options_and_absolute_paths(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, KAFKA))
    assert config.until_caught_up and config.watermark_delay_ms == 10_000
    assert config.checkpoint == str(tmp_path / "ck") and config.sinks.files == str(tmp_path / "out")
    assert isinstance(config.source, KafkaSourceConfig)
    source = pipeline_source(config)
    assert source.directory is None and config.input_dir is None
    assert source.reader_options("occurred_at") == {  # type: ignore[attr-defined]
        "bootstrap.servers": "127.0.0.1:9092",
        "topics": "orders,parcels",
        "startingoffsets": "2024-01-01T00:00:00Z",
        "maxrecordsperbatch": "50000",
        "alignstepms": "600000",
        "aligntargetrecords": "200000",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.username": "cep",
        "kafka.sasl.password": "env:KAFKA_PASSWORD",  # resolved only where the client is created
        "timefield": "occurred_at",  # events without the time field take the record timestamp
    }


def test_a_files_pipeline(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "source: {type: files, path: in}\nrules: {file: r.json}\n"
                                          "sinks: {files: out}\ncheckpoint: ck\n"))  # fmt: skip
    assert isinstance(config.source, FilesSourceConfig) and config.source.path == str(tmp_path / "in")
    assert pipeline_source(config).directory == tmp_path / "in" and config.input_dir == str(tmp_path / "in")
    assert config.rules.file == tmp_path / "r.json" and config.sinks.kafka is None and config.trigger == "1s"


def test_files_are_read_aligned_and_capped_unless_the_pipeline_says_otherwise(tmp_path: Path) -> None:
    base = "rules: {file: r.json}\nsinks: {files: out}\ncheckpoint: ck\nsource: {type: files, path: in"
    plain = pipeline_source(load_config(write(tmp_path, base + "}\n")))
    assert plain == FileSource(str(tmp_path / "in"))  # bounded or streaming alike
    assert isinstance(plain, FileSource) and plain.aligned and plain.step_ms == 600_000
    assert plain.max_batch_records == 400_000 and plain.max_batch_bytes is None and plain.max_files_per_trigger is None
    told = load_config(write(tmp_path, base + ", backfill: {aligned: true, step: 1h, target_records: 5000}}\n"))
    wanted = FileSource(str(tmp_path / "in"), aligned=True, step_ms=3_600_000, target_records=5000)
    assert pipeline_source(told) == wanted
    off = load_config(write(tmp_path, base + ", backfill: {aligned: false}, max_batch_bytes: 64MB, "
                                             "max_batch_records: null, max_files_per_trigger: 2}\n"))  # fmt: skip
    wanted = FileSource(str(tmp_path / "in"), 2, aligned=False, max_batch_records=None, max_batch_bytes=64_000_000)
    assert pipeline_source(off) == wanted
    with pytest.raises(ConfigError, match=r"field 'source.max_batch_bytes': .*expected a size such as"):
        load_config(write(tmp_path, base + ", max_batch_bytes: lots}\n"))
    with pytest.raises(ConfigError, match=r"field 'source.backfill.target_records': expected a number >= 1, got 0"):
        load_config(write(tmp_path, base + ", backfill: {target_records: 0}}\n"))


@pytest.mark.parametrize(
    ("store", "expected"),
    [
        ("sqlite:rules.db", "sqlite:{dir}/rules.db"),
        ("file:sub/rules.json", "file:{dir}/sub/rules.json"),
        ("rules.sqlite", "{dir}/rules.sqlite"),
        ("sqlite:/srv/rules.db", "sqlite:/srv/rules.db"),
        ("postgresql://cep@127.0.0.1:5432/rules", "postgresql://cep@127.0.0.1:5432/rules"),
    ],
)
def test_a_store_file_named_by_a_relative_path_lives_next_to_the_pipeline_file(
    tmp_path: Path, store: str, expected: str
) -> None:
    config = load_config(write(tmp_path, f'source: {{type: files, path: in}}\nrules: {{store: "{store}"}}\n'
                                          "sinks: {files: out}\ncheckpoint: ck\n"))  # fmt: skip
    assert config.rules.store == expected.format(dir=tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("topics: [orders, parcels]", "topics: []"), "field 'source.topics'"),
        (('sasl.password: "env:KAFKA_PASSWORD"', "sasl.password: hunter2"), "looks secret"),
        (("cep@127.0.0.1:5432/alerts", "cep:hunter2@127.0.0.1:5432/alerts"), "without password"),
        (("watermark_delay: 10s", "watermark_delay: soon"), "field 'watermark_delay'"),
        (("trigger: until_caught_up", "trigger: often"), "field 'trigger'"),
        (("type: kafka", "type: pigeons"), "field 'source'"),
        (("checkpoint: ck", "checkpoint_dir: ck"), "checkpoint"),
        (('rules: {store: "postgresql://cep@127.0.0.1:5432/rules"}', "rules: {}"), "exactly one of 'file' and 'store'"),
    ],
)
def test_errors_name_the_file_and_the_field_and_never_echo_secrets(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    text = KAFKA.replace(*change)
    assert text != KAFKA
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert str(tmp_path / "pipeline.yaml") in str(caught.value) and message in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("watermark_delai: 5s\n", "field 'watermark_delai': expected a known field (did you mean 'watermark_delay'?)"),
        ("state_page_keys: many\n", "field 'state_page_keys': expected a whole number, got 'many'"),
        ("state_page_keys: 0\n", "field 'state_page_keys': expected a number >= 1, got 0"),
    ],
)
def test_pipeline_mistakes_are_told_in_sparkceps_words(tmp_path: Path, extra: str, message: str) -> None:
    base = "source: {type: files, path: in}\nrules: {file: r.json}\nsinks: {files: out}\ncheckpoint: ck\n"
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, base + extra))
    assert message in str(caught.value)
    for library_words in ("Input should be", "Extra inputs are not permitted", "Field required", "type="):
        assert library_words not in str(caught.value)


def test_the_page_size_of_state_is_read_and_bounded(tmp_path: Path) -> None:
    base = "source: {type: files, path: in}\nrules: {file: r.json}\nsinks: {files: out}\ncheckpoint: ck\n"
    assert load_config(write(tmp_path, base)).state_page_keys == 64
    assert load_config(write(tmp_path, base + "state_page_keys: 16\n")).state_page_keys == 16
    for wrong in ("0", "100001", "many"):
        with pytest.raises(ConfigError) as caught:
            load_config(write(tmp_path, base + f"state_page_keys: {wrong}\n"))
        assert "state_page_keys" in str(caught.value)


def test_pipeline_directories_may_be_uris_and_relative_paths_follow_the_file(tmp_path: Path) -> None:
    text = (
        "rules: {file: r.json}\nsinks: {files: 's3a://bucket/jobs/out'}\ncheckpoint: 'file:///srv/ck'\n"
        "source: {type: files, path: ../in}\n"
    )
    (tmp_path / "conf").mkdir()
    config = load_config(write(tmp_path / "conf", text))
    assert config.sinks.files == "s3a://bucket/jobs/out"  # a URI stays as written, for Spark and fsspec
    assert config.checkpoint == "/srv/ck"  # a file URI is the local path
    assert config.input_dir == str(tmp_path / "in")
    assert config.local_dir(config.sinks.files) is None and config.local_dir(config.checkpoint) == Path("/srv/ck")
    assert config.spark.shuffle_partitions is None  # a new checkpoint follows the cluster's parallelism
