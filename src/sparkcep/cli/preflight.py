"""What ``sparkcep run`` and ``backtest`` check before Spark starts: the directories are what the options say,
and the servers of the job answer within a bounded wait.

A mistake found here costs a second instead of a Spark start (10-60 s) and a failed query, and leaves nothing
behind: no input directory created for a mistyped path, no checkpoint for a job that cannot run. Each message is
two lines, the thing named with what was expected and what came, then ``Fix:``. A PostgreSQL server that does
not answer raises the driver's error, which :mod:`sparkcep.diagnose` names like every other unreachable server.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparkcep.config import PipelineConfig
from sparkcep.io.checks import (
    OPTIONS,
    Origin,
    require_directory_or_nothing,
    require_input_directory,
    require_readable,
    require_writable,
)
from sparkcep.io.kafka.checks import require_kafka
from sparkcep.io.source_kinds import kind_of
from sparkcep.storage import location
from sparkcep.store import StoreError

# Where the checks live (sparkcep.io.checks: directories; sparkcep.io.kafka.checks: brokers), named here too for
# the commands that check before Spark starts.
__all__ = [
    "DEFAULT_CONNECT_TIMEOUT", "OPTIONS", "Origin", "check_pipeline", "check_stores", "require_directory_or_nothing",
    "require_input_directory", "require_kafka", "require_postgres", "require_readable", "require_writable",
]  # fmt: skip

DEFAULT_CONNECT_TIMEOUT = "10s"


# -- servers ------------------------------------------------------------------------------------------------


def require_postgres(url: str, role: str, timeout_ms: int) -> None:
    """Connect to ``url`` once, waiting at most ``timeout_ms``; the driver's error is raised as the rule store's
    own connection errors are (the failure handler names host, port, role and the fix)."""
    import psycopg

    from sparkcep.store.pg_url import driver_error_text, parse_url, refuse_password

    refuse_password(url, role)
    # libpq's connect_timeout is whole seconds, and it treats values below 2 as 2.
    seconds = max(2, round(timeout_ms / 1000))
    try:
        with psycopg.connect(parse_url(url, role).conninfo, connect_timeout=seconds):
            pass
    except psycopg.Error as exc:
        raise StoreError(driver_error_text(role, url, exc, f"{seconds}s (--connect-timeout)")) from exc


# -- what a command checks ----------------------------------------------------------------------------------


def check_stores(rules_store: str | None, alert_stores: Sequence[str], timeout_ms: int) -> None:
    """A rule store's file exists; every PostgreSQL server (rule store, alert stores) answers."""
    from sparkcep.store import check_store_exists

    if rules_store is not None:
        if _is_postgres(rules_store):
            require_postgres(rules_store, "rule store", timeout_ms)
        else:
            check_store_exists(rules_store)
    for url in alert_stores:
        if not _is_postgres(url):
            raise StoreError(
                f"alert store {url}: expected a PostgreSQL URL, postgresql://user@host:port/db\n"
                "Fix: give the database's URL (the password comes from PGPASSWORD or ~/.pgpass)"
            )
        require_postgres(url, "alert store", timeout_ms)


def check_pipeline(config: PipelineConfig, origin: Origin, timeout_ms: int) -> None:
    """What a run names (by its options or its pipeline file): its directories (no file where the output or the
    checkpoint goes, and those of its source: an existing input directory, unless it is to be created), its
    stores, and the servers of its source and sinks (Kafka brokers and topics). Places first: they cost nothing,
    a server may take the whole wait."""
    source, kind = config.source, kind_of(config.source)
    output, checkpoint = location(config.sinks.files), location(config.checkpoint)
    require_directory_or_nothing(output, origin.name("sinks.files"))
    require_directory_or_nothing(checkpoint, origin.name("checkpoint"))
    kind.check_places(source, origin)
    require_writable(output, origin.name("sinks.files"))
    require_writable(checkpoint, origin.name("checkpoint"))
    check_stores(config.rules.store, config.sinks.postgres, timeout_ms)
    kind.check_servers(source, origin, timeout_ms)
    sink = config.sinks.kafka
    if sink is not None:
        require_kafka(sink.bootstrap_servers, sink.properties, "sink", timeout_ms, origin.pipeline_file)


def _is_postgres(spec: str) -> bool:
    return spec.strip().startswith(("postgresql://", "postgres://"))
