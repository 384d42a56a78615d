"""How a local session starts its Python processes: from the installed, compiled pyspark, and warm."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sparkcep.spark import home, worker_daemon

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _fake_pip_home(root: Path) -> Path:
    real = root / "site-packages" / "pyspark"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (real / "jars").mkdir()
    (real / "python" / "lib").mkdir(parents=True)
    (real / "python" / "lib" / "pyspark.zip").write_bytes(b"PK")
    (real / "__init__.py").write_text("")
    return real


def test_the_linked_home_has_every_entry_but_the_zip_copy_and_is_made_once(tmp_path: Path) -> None:
    real = _fake_pip_home(tmp_path)
    made = home.linked_home(real, tmp_path / "cache")
    assert sorted(p.name for p in made.iterdir()) == ["__init__.py", "bin", "jars"]
    assert all(os.path.realpath(made / name) == str(real / name) for name in ("bin", "jars"))
    assert (made / "bin" / "spark-submit").is_file() and not (made / "python").exists()
    assert home.linked_home(real, tmp_path / "cache") == made  # kept while it matches
    (real / "conf").mkdir()  # the installation changed: the links are made again
    assert (home.linked_home(real, tmp_path / "cache") / "conf").is_dir()
    assert len(list((tmp_path / "cache").iterdir())) == 1  # no half-made homes left behind


def test_a_home_the_environment_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    home.use_compiled_pyspark()
    assert os.environ["SPARK_HOME"] == "/opt/spark"


def test_the_daemon_drops_only_the_zips_of_the_installed_pyspark(tmp_path: Path) -> None:
    real = _fake_pip_home(tmp_path)
    path = [str(real / "python" / "lib" / "pyspark.zip"), "/opt/spark/python/lib/pyspark.zip", str(tmp_path)]
    assert worker_daemon.without_bundled_copy(path, str(real)) == path[1:]
    assert worker_daemon.without_bundled_copy(path, None) == path


@pytest.fixture
def worker_facts(spark: SparkSession) -> Iterator[dict[str, str]]:
    import pyarrow as pa

    def facts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyspark

        for _ in batches:
            with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
                daemon = parent.read().replace(b"\0", b" ").decode()
            uds = os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "").lower() == "true"
            sockets = os.environ.get("PYTHON_WORKER_FACTORY_SOCK_DIR", "") if uds else ""
            row = {"pyspark": pyspark.__file__ or "", "daemon": daemon, "sockets": sockets}
            yield pa.RecordBatch.from_pylist([row])

    rows = spark.range(1).mapInArrow(facts, "pyspark string, daemon string, sockets string").collect()
    yield rows[0].asDict()


@pytest.mark.spark
def test_workers_import_the_compiled_pyspark_and_start_with_it_imported(worker_facts: dict[str, str]) -> None:
    """Not pyspark.zip, which Python compiles from source in every process (about 1.2 s of CPU each)."""
    assert ".zip" not in worker_facts["pyspark"]
    assert worker_facts["pyspark"].endswith(os.path.join("pyspark", "__init__.py"))
    # Forked by sparkcep's daemon, which imported pyspark, pandas and sparkcep before it forked.
    assert "-m sparkcep.spark.worker_daemon pyspark.worker" in worker_facts["daemon"]


@pytest.mark.spark
def test_a_local_sessions_python_processes_talk_to_the_jvm_over_unix_sockets_in_a_private_directory(
    spark: SparkSession, worker_facts: dict[str, str]
) -> None:
    from sparkcep.spark.session import socket_dir

    expected = socket_dir()
    assert expected is not None
    assert spark.sparkContext.getConf().get("spark.python.unix.domain.socket.enabled") == "true"
    # The daemon that forked this worker listened on a socket there (the JVM told it where).
    assert worker_facts["sockets"] == str(expected)
    assert expected.stat().st_mode & 0o777 == 0o700


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a path short enough for sockets (pytest's are too long for sun_path)."""
    import shutil
    import tempfile

    made = Path(tempfile.mkdtemp(prefix="sc-", dir="/tmp"))
    yield made
    shutil.rmtree(made)


def test_the_socket_directory_is_private_or_not_used(short_tmp: Path) -> None:
    from sparkcep.spark.session import socket_dir

    tmp_path = short_tmp
    made = socket_dir(tmp_path / "mine")
    assert made == tmp_path / "mine" / "sockets" and made.stat().st_mode & 0o777 == 0o700
    open_to_others = tmp_path / "theirs" / "sockets"
    open_to_others.mkdir(parents=True, mode=0o777)
    open_to_others.chmod(0o777)
    assert socket_dir(tmp_path / "theirs") is None  # loopback TCP rather than sockets others may reach
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "sockets").symlink_to(made)
    assert socket_dir(tmp_path / "linked") is None
    assert socket_dir(tmp_path / ("x" * 80)) is None  # a socket's path would not fit sun_path
    (tmp_path / "file").write_text("")
    assert socket_dir(tmp_path / "file") is None  # cannot be made
    assert list(made.iterdir()) == []  # the probe that binds a socket there leaves nothing behind


def test_a_directory_where_no_socket_can_be_bound_is_not_used(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some network file systems refuse sockets: Spark's workers would not start, so loopback TCP it is."""
    import socket

    from sparkcep.spark import session

    class Refusing(socket.socket):
        def bind(self, address: object) -> None:
            raise OSError(95, "Operation not supported")

    monkeypatch.setattr(session, "_unix_socket", Refusing)
    assert session.socket_dir(short_tmp) is None


def test_a_killed_sessions_socket_files_are_removed_once_old_and_unheard(tmp_path: Path) -> None:
    import socket

    from sparkcep.spark.session import remove_stale_sockets

    now = 1_000_000_000.0
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(tmp_path / ".live.sock"))
    listening.listen(1)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(tmp_path / ".dead.sock"))
    dead.close()  # its file stays, as after a kill
    young = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    young.bind(str(tmp_path / ".young.sock"))
    young.close()
    for name in (".live.sock", ".dead.sock"):
        os.utime(tmp_path / name, (now - 7_200, now - 7_200))
    os.utime(tmp_path / ".young.sock", (now - 60, now - 60))
    try:
        assert remove_stale_sockets(tmp_path, now) == [tmp_path / ".dead.sock"]
    finally:
        listening.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".live.sock", ".young.sock"]


def test_unix_sockets_are_set_only_with_a_directory_and_a_users_setting_wins(tmp_path: Path) -> None:
    from sparkcep.spark.session import SparkSettings, base_conf

    key = "spark.python.unix.domain.socket.enabled"
    assert key not in base_conf(SparkSettings())
    conf = base_conf(SparkSettings(), sockets=tmp_path)
    assert conf[key] == "true" and conf["spark.python.unix.domain.socket.dir"] == str(tmp_path)
    assert base_conf(SparkSettings(extra_conf={key: "false"}), sockets=tmp_path)[key] == "false"


@pytest.mark.spark
def test_a_local_checkpoint_is_written_with_renames_and_the_session_keeps_its_own_setting(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Hadoop's FileContext starts a `readlink` process for every rename on a local disk: a query over a local
    checkpoint starts with the FileSystem-based manager (rename(2)); others, and a user's setting, keep theirs."""
    from sparkcep.spark.checkpoint_manager import checkpoint_files_for
    from sparkcep.storage import location

    key = "spark.sql.streaming.checkpointFileManagerClass"
    with checkpoint_files_for(spark, location(tmp_path)):
        assert spark.conf.get(key, None) == (
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
        )
    assert spark.conf.get(key, None) is None  # the session's own again, for its other queries
    with checkpoint_files_for(spark, location("memory://sparkcep-test/ck")):  # another file system (hdfs://, s3a://)
        assert spark.conf.get(key, None) is None
    spark.conf.set(key, "my.own.Manager")
    try:
        with checkpoint_files_for(spark, location(tmp_path)):
            assert spark.conf.get(key, None) == "my.own.Manager"
    finally:
        spark.conf.unset(key)


def test_a_class_archive_is_written_once_adopted_when_settled_and_used_after(tmp_path: Path) -> None:
    from sparkcep.spark.class_archive import archive_options

    cds, now, gone = tmp_path / "cds", 1_000_000.0, 2**22 + 7  # no process has that pid
    first = archive_options("k1", cds, now=now, pid=gone)
    assert first.startswith(f"-XX:ArchiveClassesAtExit={cds / f'k1.{gone}.dump'} ")  # the JVM writes it at exit
    dump = cds / f"k1.{gone}.dump"
    dump.write_bytes(b"archive")
    os.utime(dump, (now, now))
    # Being written (recent): neither used nor written a second time.
    assert "-XX:" not in archive_options("k1", cds, now=now + 5, pid=1).replace("-Xlog", "")
    # Settled, its writer gone: adopted and used. What an installation left unused for a day is removed, and a
    # second dump of this key; another installation's archive in use (an hour ago) stays, or each would delete
    # the other's and write its own again.
    for name, age in (("k0.jsa", 2 * 86_400), ("k2.jsa", 3_600), (f"k1.{gone + 1}.dump", 40)):
        (cds / name).write_bytes(b"other")
        os.utime(cds / name, (now + 60 - age, now + 60 - age))
    assert archive_options("k1", cds, now=now + 60, pid=1).startswith(f"-XX:SharedArchiveFile={cds / 'k1.jsa'} ")
    assert sorted(p.name for p in cds.iterdir()) == ["k1.jsa", "k2.jsa"]
    assert (cds / "k1.jsa").stat().st_mtime == now + 60  # used now: another installation keeps it a day from now
    assert "-Xlog:cds=off" in archive_options("k1", cds, now=now + 61, pid=1)  # a stale one is ignored silently


def test_the_class_archive_options_come_before_the_users_java_options() -> None:
    from sparkcep.spark.session import SparkSettings, base_conf

    mine = SparkSettings(extra_conf={"spark.driver.extraJavaOptions": "-Dx=1"})
    options = base_conf(mine, "-XX:SharedArchiveFile=/c/k.jsa -Xlog:cds=off")["spark.driver.extraJavaOptions"]
    assert options.endswith("-XX:SharedArchiveFile=/c/k.jsa -Xlog:cds=off -Dx=1")


def test_the_full_jit_leaves_the_jvms_own_compilers_and_an_unknown_jit_is_refused() -> None:
    from sparkcep.spark.session import SparkSettings, base_conf

    quick = base_conf(SparkSettings(extra_conf={"spark.driver.extraJavaOptions": "-Dx=1"}))
    full = base_conf(SparkSettings(jit="full", extra_conf={"spark.driver.extraJavaOptions": "-Dx=1"}))
    assert quick["spark.driver.extraJavaOptions"] == "-XX:+ExitOnOutOfMemoryError -XX:TieredStopAtLevel=1 -Dx=1"
    assert full["spark.driver.extraJavaOptions"] == "-XX:+ExitOnOutOfMemoryError -Dx=1"
    assert {k: v for k, v in quick.items() if k != "spark.driver.extraJavaOptions"} == {
        k: v for k, v in full.items() if k != "spark.driver.extraJavaOptions"
    }
    with pytest.raises(ValueError, match=r"SparkSettings.jit: expected one of \['quick', 'full'\], got 'c2'"):
        SparkSettings(jit="c2")  # type: ignore[arg-type]
