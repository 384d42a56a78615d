"""One place that knows how to start a SparkSession that sparkcep's streaming query can run on."""

from __future__ import annotations

import importlib
import os
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from sparkcep.errors import EnvironmentProblem
from sparkcep.spark.class_archive import class_archive_options
from sparkcep.spark.home import use_compiled_pyspark, user_temp_dir
from sparkcep.spark.java import JavaRuntime, find_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# How the driver JVM compiles (in local mode it is the executor too): see _QUICK_JIT.
Jit = Literal["quick", "full"]


@dataclass(frozen=True)
class SparkSettings:
    # None: spark-submit's --master when launched by it, else local[*] (every core of this machine)
    master: str | None = None
    # Spark's default of 200 makes every micro-batch slow on a small machine; one per core is enough because
    # each task carries many buckets. None: the cluster's (spark.default.parallelism, else its cores). Only a
    # new checkpoint takes it: Spark keeps a stateful query's partition count (see ``sparkcep rescale``).
    shuffle_partitions: int | None = None
    app_name: str = "sparkcep"
    driver_memory: str = "2g"
    extra_conf: dict[str, str] = field(default_factory=dict)
    # "quick": C1 only (_QUICK_JIT), for sparkcep's own streaming runs; "full": C1 then C2, the JVM's default, for
    # a batch frame of millions of rows evaluated in local mode (sparkcep.api.detect), whose JVM does to_json, the
    # sort and the Arrow conversions. Executors on a cluster are not affected: sparkcep sets no executor option.
    jit: Jit = "quick"

    def __post_init__(self) -> None:
        if self.jit not in get_args(Jit):
            raise ValueError(f"SparkSettings.jit: expected one of {list(get_args(Jit))}, got {self.jit!r}")


# A JVM out of heap may lose a thread that Spark waits on (a task result getter) and hang for good: end it
# instead, so the run fails with a message and its log rather than never returning.
_EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"
# The driver's JIT compiles with C1 only. Lines are read and routed in Python, so the JVM's share of a batch is
# moving packed rows, planning and state I/O, and optimizing it with C2 cost more than it saved: on the 1M-order
# backfill C2's compiler threads took half of the JVM's CPU (18 of 37 s), C1 alone brings the JVM to 21 s
# (bench/README.md, "Where the time goes"). In local mode the driver is the executor too. A user's own
# -XX:TieredStopAtLevel in spark.driver.extraJavaOptions comes later and wins.
# Where the JVM does the per-row work, C2 pays: the batch plan over a 10M-row Parquet table took 149-157 CPU s and
# 80-84 s with C2 against 180-182 CPU s and 99 s with C1 only (at 1M, C1 only still wins: 27 against 33 CPU s),
# while the streaming backfill of the same 10M events stays better with C1 only (232 against 250 CPU s):
# SparkSettings.jit chooses (bench/README.md, "The JIT for a batch frame").
_QUICK_JIT = "-XX:TieredStopAtLevel=1"


# The JVM and its Python processes (data workers, the transformWithState state server's clients, the data source
# planners) talk over Unix domain sockets instead of loopback TCP. A live batch at 1M open orders makes about
# 1,900 state calls (a page read and a page write per touched page), each a round trip: over loopback TCP they were
# 40 % of the handler's samples (bench/README.md, "Unix domain sockets between the JVM and its Python processes").
# Only for a local session: the socket directory must exist where each executor runs.
_SOCKETS_ENABLED = "spark.python.unix.domain.socket.enabled"
_SOCKETS_DIR = "spark.python.unix.domain.socket.dir"
# A socket's path (directory, "/", a dot, a UUID and ".sock": 43 more bytes) must fit the 107 bytes of sun_path.
_LONGEST_SOCKET_DIR = 64
# Socket files outlive their sockets: Spark does not remove its Python daemons' when it stops them (one or two a
# run), nor does a killed process. One older than this that nobody listens on is removed when a session starts
# (a socket is listened on right after it is bound: no live one is ever this old and unheard).
_STALE_SOCKET_S = 3_600.0
_unix_socket = socket.socket  # (a name of this module's own, so that a test can refuse binds here only)


def socket_dir(parent: Path | None = None) -> Path | None:
    """A directory for the session's sockets that only this user can enter (0700, owned by us), made when missing;
    None where there is none (a read-only or foreign temporary directory, or a path too long for a socket):
    Spark's loopback TCP then, as without this setting."""
    directory = (parent or user_temp_dir()) / "sockets"
    if len(str(directory)) > _LONGEST_SOCKET_DIR:
        return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = directory.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or stat.S_IMODE(found.st_mode) != 0o700:
        return None  # someone else's, a link, or open to others: not a place for our sockets
    if not _can_bind(directory):
        return None  # a file system without sockets (some network mounts): Spark's workers could not start
    remove_stale_sockets(directory, time.time())
    return directory


def _can_bind(directory: Path) -> bool:
    probe_path = directory / f".probe-{os.getpid()}-{threading.get_ident()}.sock"
    try:
        with _unix_socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.bind(str(probe_path))
        return True
    except OSError:
        return False
    finally:
        probe_path.unlink(missing_ok=True)


def remove_stale_sockets(directory: Path, now: float) -> list[Path]:
    """Remove the socket files in ``directory`` older than an hour that nobody listens on; returns them."""
    removed = []
    for path in directory.glob(".*.sock"):
        try:
            if now - path.lstat().st_mtime < _STALE_SOCKET_S:
                continue
            with _unix_socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(0.5)
                probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)
            removed.append(path)
        except OSError:
            continue  # listened on but slow, or not a socket: left alone
    return removed


def base_conf(settings: SparkSettings, class_archive: str = "", sockets: Path | None = None) -> dict[str, str]:
    """The session's settings; ``class_archive``: the driver JVM's class-sharing options
    (sparkcep.spark.class_archive), before the user's own Java options; ``sockets``: a directory for Unix domain
    sockets between the JVM and its Python processes (:func:`socket_dir`; None: loopback TCP). A user's own
    ``extra_conf`` wins over both."""
    mine = settings.extra_conf.get("spark.driver.extraJavaOptions", "")
    java_options = f"{class_archive} {mine}".strip()
    return {
        # transformWithState needs RocksDB; changelog checkpointing writes only what changed per batch
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.memory": settings.driver_memory,
        # big Arrow batches: the Python side pays per batch, not per row
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        "spark.sql.adaptive.enabled": "false",
        # Workers forked from a daemon that imported pyspark, pandas and sparkcep once (sparkcep.spark.worker_daemon)
        "spark.python.daemon.module": "sparkcep.spark.worker_daemon",
        **({} if sockets is None else {_SOCKETS_ENABLED: "true", _SOCKETS_DIR: str(sockets)}),
        **(
            {}
            if settings.shuffle_partitions is None
            else {"spark.sql.shuffle.partitions": str(settings.shuffle_partitions)}
        ),
        **settings.extra_conf,
        "spark.driver.extraJavaOptions": " ".join(
            option for option in (_EXIT_ON_OOM, _QUICK_JIT if settings.jit == "quick" else "", java_options) if option
        ),
    }


def get_or_create_session(settings: SparkSettings | None = None) -> SparkSession:
    """Start (or reuse) a session. Checks Java first and points workers at this Python.

    The JVM and the Python workers it starts print on the standard error they inherit now: the command line
    points it at a log file first (``sparkcep.cli.runlog.CommandLog.output_to_log``).
    """
    settings = settings or SparkSettings()
    java = find_java()
    _check_java_home(java)
    # Without these, Python workers may start another interpreter that lacks pandas/pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    class_archive = ""
    sockets: Path | None = None
    if _local(settings.master) and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # One machine: bind to loopback (no firewall prompt, no wrong interface). A cluster's executors must
        # reach the driver at an address they can route to, so a cluster master leaves Spark's choice.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        use_compiled_pyspark()
        sockets = socket_dir()
        if "SPARK_HOME" in os.environ:  # the driver starts from an archive of the classes it loads
            home = Path(os.environ["SPARK_HOME"])
            class_archive = class_archive_options(java.executable, java.version_text, home)
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    _import_while_java_starts()
    builder = SparkSession.builder.appName(settings.app_name)
    if settings.master is not None:
        builder = builder.master(settings.master)
    for key, value in base_conf(settings, class_archive, sockets).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if exc.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        raise EnvironmentProblem(
            "Java exited while Spark was starting (what it printed is on standard error, or in the command's log "
            "file). Fix: check that 'java -version' shows Java 17 or 21 and that JAVA_HOME, if set, points at it; "
            "Spark also needs about 1 GB of free memory to start"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    if settings.shuffle_partitions is None and "spark.sql.shuffle.partitions" not in settings.extra_conf:
        spark.conf.set("spark.sql.shuffle.partitions", str(cluster_parallelism(spark)))
    return spark


# What the query's plan imports on the driver (the stateful processor's module and PySpark's pandas API need
# pandas, numpy and pyarrow), and nothing that starting the session imports: two threads importing the same
# modules in different orders could deadlock on their import locks.
_QUERY_IMPORTS = ("pandas", "pyarrow")


def _import_while_java_starts() -> None:
    """Import the query's heavy modules in a thread while the main one waits for the JVM to start.

    Starting the JVM is 2-5 s of waiting on a socket here, and importing pandas for the plan about 1 s of Python
    that came after it (``python -X importtime``: 1.05 of the 1.39 s that importing sparkcep.spark.jobs took).
    The plan's own modules import them again when it is built (sparkcep.spark.query): then from ``sys.modules``,
    or, if the thread is not done yet, by waiting for it. A module that fails here fails there again, where the
    error belongs.
    """

    def load() -> None:
        for name in _QUERY_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:  # imported again where the query needs it, which reports the error
                return

    threading.Thread(target=load, name="sparkcep-preload", daemon=True).start()


def cluster_parallelism(spark: SparkSession) -> int:
    """The partitions a new stateful query gets by default: ``spark.default.parallelism`` when set, else the
    cores Spark counts now (on a cluster, executors registering late are not counted yet: set either
    ``spark.default.parallelism`` or ``--shuffle-partitions`` for a large one)."""
    configured = spark.sparkContext.getConf().get("spark.default.parallelism")
    if configured:
        return max(1, int(configured))
    return max(1, int(spark.sparkContext.defaultParallelism))


def _local(master: str | None) -> bool:
    return master is None or master.startswith("local")


def _check_java_home(found: JavaRuntime) -> None:
    """Spark's launcher runs ``$JAVA_HOME/bin/java`` whenever JAVA_HOME is set, whatever is on PATH: a
    JAVA_HOME that ``find_java`` passed over (missing, or the wrong version) would fail inside the launcher."""
    home = os.environ.get("JAVA_HOME")
    if not home or os.path.realpath(found.executable) == os.path.realpath(os.path.join(home, "bin", "java")):
        return
    suggestion = os.path.dirname(os.path.dirname(os.path.realpath(found.executable)))
    raise EnvironmentProblem(
        f"JAVA_HOME points to {home}, which has no usable Java 17 or 21 (bin/java missing or another version), "
        f"and Spark starts Java from JAVA_HOME. Fix: unset JAVA_HOME or set it to a Java 17 or 21 installation, "
        f"for example export JAVA_HOME={suggestion} ({found.version_text})"
    )
