"""Mistakes a user makes on the command line end in one or two lines (what is wrong, then ``Fix:``; a failure with a
trace adds the log's path), a non-zero exit status, and nothing created: no input directory for a mistyped path,
no empty rule store, no checkpoint for a job that cannot run.

Every one of them is found before Spark starts: the Spark entry points are replaced by a stub that fails the
test, so these tests run in seconds (the one about JAVA_HOME runs the command as a program, which stops before
starting Java).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sparkcep.cli import main, runlog
from sparkcep.store import open_store

ROOT = Path(__file__).resolve().parents[2]
ORDER_RULES = ROOT / "examples" / "orders.rules.json"
CLOSED = "127.0.0.1:1"  # port 1: nothing listens there
CLOSED_PG = f"postgresql://u@{CLOSED}/db"


class SparkStarted(Exception):
    """Raised by the stub of Spark's entry points: the command got past every check."""


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Any]:
    """Jobs that reached the point where Spark would start (the stub records them and stops the command)."""
    import sparkcep.spark.jobs

    reached: list[Any] = []

    def stub(job: Any, *_args: object, **_kwargs: object) -> None:
        reached.append(job)
        raise SparkStarted("the command got as far as starting Spark")

    monkeypatch.setattr(sparkcep.spark.jobs, "run_job", stub)
    monkeypatch.delenv(runlog.LOG_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # logs of failures stay in tmp
    monkeypatch.chdir(tmp_path)
    return reached


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def refused(result: Result, named: str, fix: str, status: int = 1) -> list[str]:
    """The checks every refusal passes: the status, at most three lines on stderr (the message, the fix, the
    log's path), the thing named on the first line and the fix on the second. Returns the lines."""
    assert result.exit_code == status, result.output
    assert SparkStarted.__name__ not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert 2 <= len(lines) <= 3, result.stderr
    assert lines[0].startswith("Error: ") and named in lines[0], lines
    assert lines[1].startswith("Fix: ") and fix in lines[1], lines
    return lines


def run_args(tmp_path: Path, *extra: str, input_dir: Path | str | None = None) -> list[str]:
    inputs = input_dir if input_dir is not None else tmp_path / "in"
    return ["run", "--rules", str(ORDER_RULES), "--input", str(inputs), "--output", str(tmp_path / "out"),
            "--checkpoint", str(tmp_path / "ck"), "--until-caught-up", *extra]  # fmt: skip


def nothing_created(tmp_path: Path, *also: Path) -> None:
    for path in (tmp_path / "out", tmp_path / "ck", *also):
        assert not path.exists(), f"{path} was created"


def pipeline(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


FILES_PIPELINE = "rules: {rules}\nsinks: {{files: out}}\ncheckpoint: ck\nsource: {source}\n"


def files_pipeline(tmp_path: Path, source: str, rules: str | None = None) -> Path:
    rules_part = rules or f"{{file: {json.dumps(str(ORDER_RULES))}}}"
    return pipeline(tmp_path, FILES_PIPELINE.format(rules=rules_part, source=source))


# -- the input directory ---------------------------------------------------------------------------------------


def test_a_missing_input_directory_is_refused_and_not_created(tmp_path: Path) -> None:
    result = invoke(*run_args(tmp_path, input_dir=tmp_path / "data" / "nope"))
    lines = refused(result, f"--input {tmp_path}/data/nope: no such directory", "pass --create-input")
    assert len(lines) == 2  # a mistake of the user's: no trace to keep
    nothing_created(tmp_path, tmp_path / "data")


def test_create_input_keeps_creating_it_and_waiting_for_files(tmp_path: Path, no_spark: list[Any]) -> None:
    result = invoke(*run_args(tmp_path, "--create-input", input_dir=tmp_path / "data" / "new"))
    assert SparkStarted.__name__ in result.stderr
    assert (tmp_path / "data" / "new").is_dir()
    assert no_spark[0].config.source.path == str(tmp_path / "data" / "new")


def test_a_remote_input_is_checked_on_its_own_file_system(tmp_path: Path, no_spark: list[Any]) -> None:
    """A URI's existence is asked of its file system (fsspec; ``memory://`` stands in for s3a:// or hdfs://)."""
    from sparkcep.storage import location

    uri = f"memory://{tmp_path.name}/in"
    refused(invoke(*run_args(tmp_path, input_dir=uri)), f"--input {uri}: no such directory", "--create-input")
    location(uri).fs.pipe(f"/{tmp_path.name}/in/part-0.jsonl", b"{}\n")
    assert SparkStarted.__name__ in invoke(*run_args(tmp_path, input_dir=uri)).stderr
    assert no_spark[0].config.source.path == uri


def test_an_input_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text("{}\n")
    for extra in ((), ("--create-input",)):
        result = invoke(*run_args(tmp_path, *extra, input_dir=tmp_path / "events.jsonl"))
        refused(result, f"--input {tmp_path}/events.jsonl: expected a directory, got a file", "not one of the files")
    nothing_created(tmp_path)


@pytest.mark.parametrize("option", ["--output", "--checkpoint"])
def test_an_output_or_checkpoint_path_that_is_a_file_is_refused(tmp_path: Path, option: str) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "taken").write_text("")
    args = run_args(tmp_path)
    args[args.index(option) + 1] = str(tmp_path / "taken")
    refused(invoke(*args), f"{option} {tmp_path}/taken: expected a directory, got a file", "move the file away")
    assert (tmp_path / "taken").is_file()


def test_the_pipeline_files_source_must_exist_unless_it_says_create(tmp_path: Path, no_spark: list[Any]) -> None:
    config = files_pipeline(tmp_path, "{type: files, path: data/nope}")
    result = invoke("run", "--config", str(config))
    refused(result, f"{config}: source.path {tmp_path}/data/nope: no such directory", "set 'create: true'")
    nothing_created(tmp_path, tmp_path / "data")
    config = files_pipeline(tmp_path, "{type: files, path: data/nope, create: true}")
    assert SparkStarted.__name__ in invoke("run", "--config", str(config)).stderr
    assert (tmp_path / "data" / "nope").is_dir() and len(no_spark) == 1


def test_create_input_belongs_in_the_pipeline_file_with_config(tmp_path: Path) -> None:
    config = files_pipeline(tmp_path, "{type: files, path: in}")
    result = invoke("run", "--config", str(config), "--create-input")
    assert result.exit_code == 2 and "'create: true'" in result.stderr
    nothing_created(tmp_path, tmp_path / "in")


def test_a_backtest_needs_existing_history(tmp_path: Path) -> None:
    args = ["backtest", "--rules", str(ORDER_RULES), "--input", str(tmp_path / "hist"), "--output", str(tmp_path / "o")]
    refused(invoke(*args), f"--input {tmp_path}/hist: no such directory", "check the path")
    nothing_created(tmp_path, tmp_path / "hist", tmp_path / "o")


# -- rule stores -----------------------------------------------------------------------------------------------

READING_COMMANDS = [
    ["list"],
    ["list", "--json"],
    ["history", "order-fulfilment"],
    ["export"],
    ["update", "order-fulfilment", '{"deadline": "2d"}'],
    ["pause", "order-fulfilment"],
    ["resume", "order-fulfilment"],
    ["delete", "order-fulfilment"],
    ["control", "DELETE_RULES_ALL"],
]


@pytest.mark.parametrize("spec", ["sqlite:typo/rules.db", "file:typo/rules.json", "typo/rules.db"])
@pytest.mark.parametrize("command", READING_COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_rules_commands_refuse_a_missing_store(tmp_path: Path, spec: str, command: list[str]) -> None:
    result = invoke("rules", *command, "--store", spec)
    lines = refused(result, f"rule store {spec}: {tmp_path}/typo/rules.", f"'sparkcep rules add FILE --store {spec}'")
    assert len(lines) == 2 and "does not exist" in lines[0]
    nothing_created(tmp_path, tmp_path / "typo")


def test_rules_add_and_import_create_a_missing_store(tmp_path: Path) -> None:
    assert invoke("rules", "import", str(ORDER_RULES), "--store", "sqlite:new/rules.db").exit_code == 0
    assert (tmp_path / "new" / "rules.db").is_file()
    rule = {"id": "r1", "type": "inactivity", "key": "device_id", "timeout": "5m", "event_types": ["TRACK"],
            "offline_event": "OFF", "online_event": "ON"}  # fmt: skip
    added = invoke("rules", "add", json.dumps(rule), "--store", "file:other/rules.json")
    assert added.exit_code == 0, added.output
    assert invoke("rules", "list", "--store", "file:other/rules.json").stdout.count("r1") == 1


def test_a_directory_given_as_store_is_refused(tmp_path: Path) -> None:
    (tmp_path / "stores").mkdir()
    refused(invoke("rules", "list", "--store", "file:stores"), f"{tmp_path}/stores is a directory", "rules.json")


def test_run_refuses_a_missing_rule_store_before_creating_anything(tmp_path: Path) -> None:
    args = run_args(tmp_path, "--create-input")
    args[1:3] = ["--rules-store", "sqlite:typo/rules.db"]
    refused(invoke(*args), "rule store sqlite:typo/rules.db", "sparkcep rules add")
    nothing_created(tmp_path, tmp_path / "typo", tmp_path / "in")


def test_a_pipeline_files_rule_store_must_exist(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    config = files_pipeline(tmp_path, "{type: files, path: in}", rules="{store: 'sqlite:typo/rules.db'}")
    refused(invoke("run", "--config", str(config)), f"{tmp_path}/typo/rules.db does not exist", "rules add")
    nothing_created(tmp_path, tmp_path / "typo")


def test_the_console_refuses_a_missing_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkcep.cli import console as console_command

    served: list[object] = []

    def serve(app: object, listeners: list[socket.socket]) -> None:
        served.append(app)
        for listener in listeners:
            listener.close()

    monkeypatch.setattr(console_command, "serve", serve)
    refused(invoke("console", "--store", "sqlite:typo/rules.db"), "rule store sqlite:typo/rules.db", "rules add")
    assert served == []
    nothing_created(tmp_path, tmp_path / "typo")
    open_store("sqlite:typo/rules.db")  # once it exists, the console serves it (on a free port: --port 0)
    assert invoke("console", "--store", "sqlite:typo/rules.db", "--port", "0").exit_code == 0 and len(served) == 1


# -- servers: a bounded wait, one message ------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "role"), [("--rules-store", "rule store"), ("--alert-store", "alert store")])
def test_an_unreachable_postgresql_server_is_named_before_spark(tmp_path: Path, option: str, role: str) -> None:
    (tmp_path / "in").mkdir()
    args = run_args(tmp_path, option, CLOSED_PG, "--connect-timeout", "2s")
    if option == "--rules-store":
        args[1:3] = []
    lines = refused(invoke(*args), f"cannot reach PostgreSQL at {CLOSED} ({role}): connection refused",
                    "start PostgreSQL there or correct host and port")  # fmt: skip
    assert lines[2].startswith("Full trace: ") and Path(lines[2].removeprefix("Full trace: ")).is_file()
    nothing_created(tmp_path)


PG_PASSWORD = "right-horse-battery"  # noqa: S105  # a test server's


@pytest.fixture(scope="module")
def password_postgres() -> Iterator[str]:
    """URL (without password or database) of a PostgreSQL server that asks TCP clients for a password: user
    postgres, password :data:`PG_PASSWORD` (the session's test server trusts everyone, so a wrong password would
    pass there)."""
    from servers import postgres_binaries, postgres_server

    if postgres_binaries() is None:
        pytest.skip("PostgreSQL server binaries are not installed")
    with postgres_server(password=PG_PASSWORD) as url:
        yield url.removesuffix("/postgres")




@pytest.mark.parametrize(
    ("password", "database", "named", "fix"),
    [
        ("wrong-staple", "postgres", "refused the login of user 'postgres': wrong password (or no such user)",
         "give that user's password in PGPASSWORD or a ~/.pgpass line (127.0.0.1:{port}:DATABASE:postgres:"),
        (None, "postgres", "asks for a password and none was given", "set PGPASSWORD, or add a ~/.pgpass line"),
        (PG_PASSWORD, "nodb", "has no database 'nodb'", "correct the database name at the end of the URL, or create "
         "it (createdb -h 127.0.0.1 -p {port} nodb)"),
    ],
    ids=["wrong-password", "no-password", "no-database"],
)  # fmt: skip
def test_a_refused_postgresql_login_is_told_apart_from_an_unreachable_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password_postgres: str, password: str | None, database: str,
    named: str, fix: str,
) -> None:  # fmt: skip
    (tmp_path / "in").mkdir()
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-pgpass"))  # the machine's ~/.pgpass stays out of it
    if password is None:
        monkeypatch.delenv("PGPASSWORD", raising=False)
    else:
        monkeypatch.setenv("PGPASSWORD", password)
    port = password_postgres.rsplit(":", 1)[1]
    lines = refused(invoke(*run_args(tmp_path, "--alert-store", f"{password_postgres}/{database}")),
                    f"Error: PostgreSQL at 127.0.0.1:{port} (alert store) {named}", fix.format(port=port))  # fmt: skip
    assert "cannot reach" not in lines[0] and "FATAL" not in lines[0] and "fATAL" not in lines[0]
    assert password is None or password not in "\n".join(lines)
    nothing_created(tmp_path)


def test_the_right_password_passes_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password_postgres: str, no_spark: list[Any]
) -> None:
    (tmp_path / "in").mkdir()
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    result = invoke(*run_args(tmp_path, "--alert-store", f"{password_postgres}/postgres"))
    assert SparkStarted.__name__ in result.stderr and len(no_spark) == 1


def test_a_postgresql_server_that_never_answers_is_a_timeout(tmp_path: Path, silent_server: str) -> None:
    (tmp_path / "in").mkdir()
    args = run_args(tmp_path, "--alert-store", f"postgresql://u@{silent_server}/db", "--connect-timeout", "1s")
    port = silent_server.rsplit(":", 1)[1]
    lines = refused(invoke(*args), f"PostgreSQL at {silent_server} (alert store) did not answer within 2s "
                    "(--connect-timeout)", f"lets this machine reach port {port} of 127.0.0.1")  # fmt: skip
    assert "or give it longer with --connect-timeout" in lines[1] and "cannot reach" not in lines[0]
    nothing_created(tmp_path)


def kafka_pipeline(tmp_path: Path, source: str = "", sink: str = "") -> Path:
    (tmp_path / "in").mkdir(exist_ok=True)
    source = source or "{type: files, path: in}"
    sinks = f"{{files: out, kafka: {{bootstrap_servers: '{sink}'}}}}" if sink else "{files: out}"
    text = f"source: {source}\nrules: {{file: {json.dumps(str(ORDER_RULES))}}}\nsinks: {sinks}\ncheckpoint: ck\n"
    return pipeline(tmp_path, text)


def test_an_unreachable_kafka_source_is_named_before_spark(tmp_path: Path) -> None:
    config = kafka_pipeline(tmp_path, source=f"{{type: kafka, bootstrap_servers: '{CLOSED}', topics: [orders]}}")
    lines = refused(invoke("run", "--config", str(config)), f"cannot reach Kafka at {CLOSED} (source): connection "
                    "refused", f"start the brokers or correct source.bootstrap_servers in {config}")  # fmt: skip
    assert len(lines) == 2
    nothing_created(tmp_path)


def test_an_unreachable_kafka_sink_is_named_before_spark(tmp_path: Path) -> None:
    config = kafka_pipeline(tmp_path, sink=CLOSED)
    refused(invoke("run", "--config", str(config)), f"cannot reach Kafka at {CLOSED} (sink): connection refused",
            f"correct sinks.kafka.bootstrap_servers in {config}")  # fmt: skip
    nothing_created(tmp_path)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """``host:port`` of a server that accepts connections and never answers (like a firewall that drops)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_a_kafka_broker_that_never_answers_is_given_up_after_the_connect_timeout(
    tmp_path: Path, silent_server: str
) -> None:
    config = kafka_pipeline(tmp_path, source=f"{{type: kafka, bootstrap_servers: '{silent_server}', topics: [o]}}")
    result = invoke("run", "--config", str(config), "--connect-timeout", "1s")
    refused(result, f"cannot reach Kafka at {silent_server} (source): no answer within 1s (--connect-timeout)",
            "check that the brokers run")  # fmt: skip
    nothing_created(tmp_path)


def test_a_missing_kafka_source_topic_is_named_with_the_topics_there(tmp_path: Path, kafka: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka})
    wanted = ["orders-v2", "payments", "orders", "devices"]
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in wanted]).values():
        try:
            future.result(timeout=30)
        except Exception as exc:  # created by an earlier test of this session
            assert "already exists" in str(exc).lower() or "TOPIC_ALREADY_EXISTS" in str(exc), exc
    config = kafka_pipeline(tmp_path, source=f"{{type: kafka, bootstrap_servers: '{kafka}', topics: [orderz]}}")
    named = f"Kafka topic 'orderz' (source) does not exist at {kafka}; topics there, closest first: 'orders', "
    named += "'orders-v2'"
    lines = refused(invoke("run", "--config", str(config)), named, f"correct source.topics in {config}")
    assert "--create --topic orderz" in lines[1]
    assert "__consumer_offsets" not in lines[0]
    nothing_created(tmp_path)


def test_the_list_of_topics_there_is_capped_closest_first() -> None:
    from sparkcep.io.kafka.client import SHOWN_TOPICS, topics_there

    names = [f"topic-{index:03d}" for index in range(40)] + ["orders", "__consumer_offsets"]
    text = topics_there("order", names)
    assert text.startswith("topics there, closest first: 'orders', ")
    assert text.count("'") == 2 * SHOWN_TOPICS and text.endswith(f" and {41 - SHOWN_TOPICS} more")
    assert "__consumer_offsets" not in text
    assert topics_there("x", ["__consumer_offsets"]) == "the cluster has no topics"


# -- Java ------------------------------------------------------------------------------------------------------


def test_a_java_home_pointing_nowhere_ends_before_java_starts(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    (tmp_path / "in").mkdir()
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop(runlog.LOG_DIR_ENV, None)
    command = [sys.executable, "-m", "sparkcep.cli", *run_args(tmp_path)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 3, done.stderr
    assert lines[0].startswith("Error: JAVA_HOME points to /nonexistent, which has no usable Java 17 or 21")
    assert lines[1].startswith("Fix: unset JAVA_HOME or set it to a Java 17 or 21 installation")
    assert lines[2].startswith("Full trace: ")
    assert not (tmp_path / "ck" / "query").exists() and not (tmp_path / "out").exists()  # no query ever ran


# -- rule files ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "place", "expected", "got"),
    [
        ("hello\n", "line 1, column 1", "expected a value", "got 'hello'"),
        ('{\n  "rules": [\n    {"id": "a", "type": "inactivity",}\n  ]\n}\n', "line 3, column 38",
         "expected a field name in double quotes (JSON allows no comma after the last field", "got '}'"),
        ('{"rules": [{"id": "a" "type": 1}]}', "line 1, column 23", "expected ',' between two items",
         "got '\"type\": 1}]}'"),
        ('{"rules": [', "line 1, column 12", "expected a value", "got the end of the file"),
    ],
)  # fmt: skip
def test_a_rules_file_that_is_not_json_is_named_with_line_column_and_fix(
    tmp_path: Path, text: str, place: str, expected: str, got: str
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "bad.rules.json").write_text(text)
    args = run_args(tmp_path)
    args[2] = "bad.rules.json"  # relative, as an operator types it
    lines = refused(invoke(*args), f"rule file bad.rules.json, {place}: {expected}", f"{place}, then check it with "
                    "'sparkcep rules validate bad.rules.json'")  # fmt: skip
    assert len(lines) == 2 and got in lines[0]
    assert "field '" not in lines[0] and "Expecting" not in lines[0]  # not the decoder's words, no rule field
    nothing_created(tmp_path)
    validated = invoke("rules", "validate", "bad.rules.json")  # the command the fix names says the same
    assert validated.exit_code == 1 and lines[0] in validated.stderr


def test_a_missing_rules_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    args = run_args(tmp_path)
    args[2] = str(tmp_path / "nope.json")
    result = invoke(*args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) <= 3 and "'--rules'" in lines[-1] and "nope.json" in lines[-1] and "does not exist" in lines[-1]
    nothing_created(tmp_path)


def test_a_bad_trigger_interval_names_the_option(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    args = [*run_args(tmp_path), "--trigger-interval", "soon"]
    args.remove("--until-caught-up")
    result = invoke(*args)
    assert result.exit_code == 2
    assert "Invalid value for --trigger-interval" in result.stderr and "'soon'" in result.stderr
    nothing_created(tmp_path)


# -- other commands --------------------------------------------------------------------------------------------


def test_simulate_into_a_directory_with_part_files_asks_for_overwrite(tmp_path: Path) -> None:
    assert invoke("simulate", "orders", "--out", "data", "--events", "10").exit_code == 0
    before = sorted((tmp_path / "data").iterdir())
    result = invoke("simulate", "orders", "--out", "data", "--events", "20", "--seed", "2")
    refused(result, "--out data: expected a directory without part files, got 1", "pass --overwrite")
    assert sorted((tmp_path / "data").iterdir()) == before
    assert invoke("simulate", "orders", "--out", "data", "--events", "20", "--overwrite").exit_code == 0


def test_a_backtest_into_a_directory_with_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hist").mkdir()
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("mine\n")
    args = ["backtest", "--rules", str(ORDER_RULES), "--input", str(tmp_path / "hist"), "--output", str(tmp_path / "o")]
    refused(invoke(*args), f"--output {tmp_path}/o: expected a new or empty directory", "choose another output")
    assert [path.name for path in (tmp_path / "o").iterdir()] == ["notes.txt"]


def test_an_alert_store_that_is_not_postgresql_is_named(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    result = invoke(*run_args(tmp_path, "--alert-store", "sqlite:alerts.db"))
    refused(result, "alert store sqlite:alerts.db: expected a PostgreSQL URL", "give the database's URL")
    nothing_created(tmp_path, tmp_path / "alerts.db")


# -- write permission, before Spark starts ----------------------------------------------------------------------


def _as_unprivileged() -> list[str]:
    """A command prefix under which file modes apply: none for an ordinary user; for root, a user namespace (root
    keeps its uid there but loses CAP_DAC_OVERRIDE on files of the outer namespace)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "true"], check=False).returncode:
        pytest.skip("root without user namespaces: file modes do not apply")
    return ["unshare", "--user"]


def _run_program(tmp_path: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    env.pop(runlog.LOG_DIR_ENV, None)
    command = [*_as_unprivileged(), sys.executable, "-m", "sparkcep.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)


@pytest.mark.parametrize(
    ("option", "place", "got"),
    [
        ("--output", "locked", "one, owned by"),
        ("--output", "locked/out", "{tmp}/locked (where it would be created), owned by"),
        ("--checkpoint", "locked/ck", "{tmp}/locked (where it would be created), owned by"),
        ("--checkpoint", "ck", "{tmp}/ck/query/offsets under it, owned by"),
    ],
)
def test_an_unwritable_output_or_checkpoint_is_refused_before_spark_creating_nothing(
    tmp_path: Path, option: str, place: str, got: str
) -> None:
    """Found in a second instead of after a Spark start (~38 s), and nothing created: not the checkpoint, not the
    output directory, no log in the checkpoint."""
    (tmp_path / "in").mkdir()
    (tmp_path / "locked").mkdir()
    (tmp_path / "ck" / "query" / "offsets").mkdir(parents=True)  # a checkpoint a job of another user wrote
    before = sorted(str(path) for path in tmp_path.rglob("*"))
    (tmp_path / "locked").chmod(0o555)
    (tmp_path / "ck" / "query" / "offsets").chmod(0o555)
    args = run_args(tmp_path)
    args[args.index("--checkpoint") + 1] = str(tmp_path / "ck2")
    args[args.index(option) + 1] = str(tmp_path / place)
    try:
        done = _run_program(tmp_path, args)
    finally:
        (tmp_path / "locked").chmod(0o755)
        (tmp_path / "ck" / "query" / "offsets").chmod(0o755)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith(f"Error: {option} {tmp_path / place}: expected a directory user ")
    assert " can write to, got " + got.format(tmp=tmp_path) in lines[0] and "r-x" in lines[0]
    assert lines[1].startswith("Fix: let user ") and "chown" in lines[1] and "or choose another directory" in lines[1]
    assert sorted(str(path) for path in tmp_path.rglob("*") if "state" not in path.parts) == before


def test_a_writable_place_passes_the_check(tmp_path: Path, no_spark: list[Any]) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    result = invoke(*run_args(tmp_path))
    assert SparkStarted.__name__ in result.stderr and len(no_spark) == 1


def test_a_pipeline_files_sink_under_an_unwritable_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "locked").mkdir()
    config = pipeline(tmp_path, f"source: {{type: files, path: in}}\nrules: {{file: {json.dumps(str(ORDER_RULES))}}}\n"
                      "sinks: {files: locked/out}\ncheckpoint: ck\n")  # fmt: skip
    (tmp_path / "locked").chmod(0o555)
    try:
        done = _run_program(tmp_path, ["run", "--config", str(config)])
    finally:
        (tmp_path / "locked").chmod(0o755)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"Error: {config}: sinks.files {tmp_path}/locked/out: expected a directory user ")
    assert not (tmp_path / "ck").exists() and not (tmp_path / "locked" / "out").exists()


# -- --log-format json: errors before Spark starts too ----------------------------------------------------------


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as a JSON object (fails on a line that is not one)."""
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert records and all(isinstance(record, dict) for record in records)
    return records


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        ((), 1, "Error: --input {tmp}/nope: no such directory\nFix: check the path, or pass --create-input"),
        (("--alert-store", CLOSED_PG, "--connect-timeout", "2s"), 1,
         "Error: cannot reach PostgreSQL at 127.0.0.1:1 (alert store): connection refused\nFix: start PostgreSQL"),
        (("--watermark-delay", "soon"), 2, "Error: Invalid value for '--watermark-delay'"),
        (("--rules-store", "sqlite:x.db"), 2, "Error: give exactly one of --rules FILE and --rules-store SPEC"),
    ],
    ids=["missing-input", "unreachable-postgresql", "bad-option-value", "usage"],
)  # fmt: skip
def test_errors_before_spark_starts_are_json_lines_with_log_format_json(
    tmp_path: Path, extra: tuple[str, ...], status: int, message: str
) -> None:
    args = run_args(tmp_path, *extra, "--log-format", "json", input_dir=tmp_path / "nope")
    if extra and extra[0] != "--rules-store":
        (tmp_path / "nope").mkdir()
    result = invoke(*args)
    assert result.exit_code == status, result.stderr
    [record] = _json_lines(result.stderr)  # one object, nothing else on stderr (no click usage text)
    assert (record["event"], record["level"]) == ("error", "error") and record["time"].endswith("Z")
    assert record["message"].startswith(message.format(tmp=tmp_path)), record
    assert result.stdout == ""
    nothing_created(tmp_path)


def test_log_format_json_with_an_equals_sign_and_for_backtest(tmp_path: Path) -> None:
    args = ["backtest", "--rules", str(ORDER_RULES), "--input", str(tmp_path / "hist"), "--output",
            str(tmp_path / "o"), "--log-format=json"]  # fmt: skip
    [record] = _json_lines(invoke(*args).stderr)
    assert record["message"].startswith(f"Error: --input {tmp_path}/hist: no such directory\nFix: check the path")


def test_text_format_errors_stay_text(tmp_path: Path) -> None:
    result = invoke(*run_args(tmp_path, "--log-format", "text", input_dir=tmp_path / "nope"))
    assert result.stderr.startswith(f"Error: --input {tmp_path}/nope: no such directory\n")
    usage = invoke(*run_args(tmp_path, "--watermark-delay", "soon"))
    assert usage.exit_code == 2 and "Usage: " in usage.stderr


def test_a_file_above_a_missing_output_is_refused_before_spark(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "afile").write_text("")
    args = run_args(tmp_path)
    args[args.index("--output") + 1] = str(tmp_path / "afile" / "out")
    refused(invoke(*args), f"--output {tmp_path}/afile/out: expected a path whose directories can be created, got "
            f"{tmp_path}/afile, a file", f"move {tmp_path}/afile away")  # fmt: skip
    nothing_created(tmp_path)
