"""``sparkcep rescale``: continue a job on another number of shuffle partitions, losing nothing.

Spark fixes the shuffle-partition count of a stateful query at its first micro-batch and keeps it in the offset log
for the life of the checkpoint. Rescaling therefore prepares a *new* checkpoint whose query begins exactly where
the old one's last committed micro-batch ended; the next ``sparkcep run --checkpoint NEW`` (same rules, same
input) starts it:

- **State.** The old state at its last committed batch is read with Spark's state data source (the ``bucket``
  index, the ``pages`` map and the registered timers), re-keyed old grouping key -> bucket number -> new grouping
  key (balanced over the new partitions, see :mod:`sparkcep.spark.placement`) and kept as Parquet in NEW (which
  never reads OLD again). The new query takes it as transformWithState's initial state
  (``EngineProcessor.handleInitialState``). Spark applies an initial state in batch 0 only (``currentBatchId ==
  0``, also when batch 0 runs again after a kill), so the run gives it until batch 0 is committed; the first start
  after that deletes the Parquet copy (an initial state given to a later batch is ignored by Spark, but read).
- **Input.** The end offsets of the old query's last batch become the reader's ``startingoffsets`` (sparkcep's
  file and Kafka readers, :mod:`sparkcep.io.file_reader`, :mod:`sparkcep.io.kafka.reader`), which a reader uses
  only while its query has no offsets yet. Writing NEW's offset log instead would number NEW's first batch
  after OLD's, and Spark would then skip the initial state. Control records the old query had not read yet are
  copied into NEW's control stream. Checkpoints of Spark's own file source (before sparkcep's reader) are refused.
- **Watermark.** A restarted query resumes with the watermark its commit log records (``nextBatchWatermarkMs``);
  NEW has none. Its processor judges lateness against that watermark as a floor, and a control record in NEW's
  control stream whose event time is that watermark plus the run's delay (written at the first start, when the
  delay is known) moves Spark's own watermark there after batch 0: late events and timers come out as if the
  old query had gone on.
- **Batch numbers.** Output files and metrics are named by batch id, so NEW's batches are numbered on from
  OLD's (``batch_base``); OLD's batch metrics are carried over (summaries, the rule feed's "latest event time").
- **Partitions.** The first start sets ``spark.sql.shuffle.partitions`` to the rescaled count while it starts the
  query (Spark copies the session's settings then and records them in batch 0's offsets); from then on Spark's
  offset log keeps it, whatever ``--shuffle-partitions`` says.

``NEW/sparkcep/rescaled.json`` records all this; a rescale is built in a hidden sibling directory and renamed to
NEW when complete, so NEW either does not exist or is whole.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sparkcep.errors import CheckpointIncomplete, SparkcepError
from sparkcep.io.source_kinds import source_kinds
from sparkcep.runfiles import layout
from sparkcep.runfiles.checkpoint import check_checkpoint_complete
from sparkcep.spark.placement import balanced_bucket_keys, identity_bucket_keys
from sparkcep.spark.processor import INITIAL_INDEX, INITIAL_PAGE, INITIAL_TIMER
from sparkcep.storage import Location, location
from sparkcep.timeutil import format_iso

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMAT_VERSION = 1
STATE_DDL = "bucket int, kind int, number long, blob binary, old int"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
_CONTROL_SOURCE = 1  # the control stream is the second source of the plan (sparkcep.spark.query.build_stream)
_LOG_NAME = re.compile(r"(\d+)(\.compact)?")


class RescaleError(SparkcepError):
    """A checkpoint cannot be rescaled as asked: the target is not empty, the partition count is not positive, or
    the old checkpoint's source cannot be continued elsewhere. (A missing or incomplete old checkpoint is a
    :class:`sparkcep.errors.CheckpointIncomplete`.)"""


# -- what a rescale records -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rescaled:
    """``NEW/sparkcep/rescaled.json``."""

    origin: str  # the old checkpoint (URI)
    origin_batch: int  # the old query's last committed batch id (Spark's numbering)
    from_partitions: int
    partitions: int
    batch_base: int  # NEW's batch n is batch_base + n in file names and metrics
    watermark_ms: int | None  # the watermark the old query would have resumed with (None: it had none yet)
    input_offsets: str | None  # the input reader's offsets (JSON) where the old query stopped; None: it read nothing
    carried_batches: int  # batch metrics carried over (runfiles.checkpoint: NEW has no offsets for them)
    rows: dict[str, int] = field(default_factory=dict)  # state rows carried: buckets, pages, timers
    version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, checkpoint: Location) -> Rescaled | None:
        """What the rescale that prepared ``checkpoint`` recorded; None for a checkpoint no rescale prepared."""
        path = layout.rescaled_file(checkpoint)
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise CheckpointIncomplete(
                str(checkpoint),
                f"{path}: expected a rescale record of version {FORMAT_VERSION}, got {data!r:.200}",
            )
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in known})


@dataclass(frozen=True)
class RescaleReport:
    """What ``sparkcep rescale`` did (printed as JSON)."""

    origin: str
    target: str
    from_partitions: int
    partitions: int
    buckets: int
    origin_batch: int
    next_batch: int
    watermark: str | None
    rows: dict[str, int]
    control_records_carried: int
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- the old checkpoint -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OldCheckpoint:
    """What a rescale needs of the old checkpoint, read from its files (no Spark)."""

    location: Location
    run: dict[str, Any]  # its run.json
    last_batch: int
    partitions: int
    watermark_ms: int | None
    input_offsets: str | None
    unread_control: tuple[Location, ...]
    batch_base: int  # its own base when it was itself rescaled

    @property
    def buckets(self) -> int:
        return int(self.run["buckets"])

    @property
    def bucket_keys(self) -> tuple[int, ...]:
        stored = self.run.get("bucket_keys")
        # Written before balanced placement: state is keyed by the bucket numbers themselves.
        return tuple(int(key) for key in stored) if stored else identity_bucket_keys(self.buckets)


def log_files(directory: Location) -> dict[int, Location]:
    """A Spark metadata log (offsets, commits): batch id -> its file (hidden and temporary files skipped)."""
    return {int(child.name): child for child in directory.children("[0-9]*") if child.name.isdigit()}


def _log_body(file: Location, checkpoint: Location) -> list[str]:
    """The lines of a log entry after its version line (``v1``)."""
    lines = file.read_text().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise CheckpointIncomplete(str(checkpoint), f"{file}: expected a Spark log entry (v1 ...), got {lines[:1]!r}")
    return lines[1:]


def read_old(old: Location) -> OldCheckpoint:
    """The old checkpoint's layout, last committed batch, watermark and source offsets; refuses one that is
    missing, incomplete, mid-batch or read by a source that cannot be continued."""
    if not layout.run_record(old).exists():
        raise CheckpointIncomplete(str(old), f"expected a sparkcep checkpoint with {layout.run_record(old)}, got none")
    check_checkpoint_complete(old)
    commits, offsets = log_files(layout.commits_dir(old)), log_files(layout.offsets_dir(old))
    if not commits:
        raise CheckpointIncomplete(
            str(old),
            f"expected at least one committed micro-batch in {layout.commits_dir(old)}, got none (nothing to rescale)",
        )
    last = max(commits)
    if max(offsets, default=-1) != last:
        raise CheckpointIncomplete(
            str(old),
            f"its query planned micro-batch {max(offsets, default=-1)} but committed only up to {last}: it stopped "
            "in the middle of a batch. Resume it once (sparkcep run ... --stop-after 60) so Spark finishes that batch, "
            "then rescale",
        )
    body = _log_body(offsets[last], old)
    metadata = json.loads(body[0])
    conf = metadata.get("conf", {})
    partitions = int(conf.get(SHUFFLE_PARTITIONS, 0))
    commit = json.loads(_log_body(commits[last], old)[0])
    # The watermark a restart of the old query would run its next batch with (Spark writes 0 for none).
    watermark = int(commit.get("nextBatchWatermarkMs", 0)) or None
    run = json.loads(layout.run_record(old).read_text())
    sources = body[1:]
    if len(sources) != 2:
        raise RescaleError(
            f"checkpoint {old}: expected two sources in {offsets[last]} (the input and the control stream), got "
            f"{len(sources)}"
        )
    input_offsets = _input_offsets(old, run, sources[0])
    previous = Rescaled.read(old)
    return OldCheckpoint(
        location=old,
        run=run,
        last_batch=last,
        partitions=partitions,
        watermark_ms=watermark,
        input_offsets=input_offsets,
        unread_control=_unread_control(old, sources[_CONTROL_SOURCE]),
        batch_base=previous.batch_base if previous is not None else 0,
    )


def _input_offsets(old: Location, run: dict[str, Any], text: str) -> str | None:
    """The input reader's offsets at the old query's last batch, if its reader can start from them."""
    if text.strip() in ("", "-"):
        return None  # the source was never planned: the new query starts where the old one would have
    offsets = json.loads(text)
    if run.get("file_reader") == "spark" or (isinstance(offsets, dict) and "logOffset" in offsets):
        raise RescaleError(
            f"checkpoint {old}: expected input read by sparkcep's file reader or Kafka reader, got Spark's own file "
            "source (a checkpoint begun before sparkcep read files itself), whose position cannot be handed to a new "
            "query. Start a new checkpoint with the partitions you want instead (its input is read from the start)"
        )
    for kind in source_kinds().values() if isinstance(offsets, dict) else ():
        own = kind.own_offsets(offsets)  # the files reader's, the Kafka reader's, ...
        if own is not None:
            return own
    raise RescaleError(
        f"checkpoint {old}: expected the offsets of sparkcep's file or Kafka reader, got {text!r:.200} (Spark's Kafka "
        "connector, implementation: spark-connector, cannot be rescaled yet)"
    )


def _unread_control(old: Location, text: str) -> tuple[Location, ...]:
    """Control files the old query had not read by its last batch (an idle advance or a rule log written just
    before it stopped): the new query must read them, as a restart of the old one would have."""
    control = layout.control_dir(old)
    upto = -1 if text.strip() in ("", "-") else int(json.loads(text)["logOffset"])
    read: set[str] = set()
    # Spark's file-source log: one file per batch, every tenth compacted with all before it.
    for entry in layout.query_source_dir(old, _CONTROL_SOURCE).children():
        if not _LOG_NAME.fullmatch(entry.name):
            continue
        for line in _log_body(entry, old):
            if line.strip():
                item = json.loads(line)
                if int(item["batchId"]) <= upto:
                    read.add(unquote(str(item["path"]).rstrip("/").rsplit("/", 1)[-1]))  # a file URI
    # Spark's file source skips hidden and underscore names, as the control stream's writers never use them.
    return tuple(f for f in control.children() if f.name not in read and not f.name.startswith((".", "_")))


# -- rescaling ----------------------------------------------------------------------------------------------


def check_rescale(
    old: str | os.PathLike[str] | Location, new: str | os.PathLike[str] | Location, partitions: int
) -> OldCheckpoint:
    """What :func:`rescale` checks before it starts any work (no Spark needed): the old checkpoint (see
    :func:`read_old`), a positive partition count, and a new or empty target outside the old checkpoint."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise RescaleError(f"--partitions: expected a positive number of shuffle partitions, got {partitions!r}")
    source, target = location(old), location(new)
    if source.is_local and target.is_local:
        common = os.path.commonpath([source.path, target.path])
        if common in (source.path, target.path):
            raise RescaleError(f"--to: expected a directory outside the old checkpoint {source}, got {target}")
    if target.exists() and (not target.is_dir() or target.children()):
        raise RescaleError(
            f"--to: expected a new or empty directory for the rescaled checkpoint, got {target} (not empty)"
        )
    return read_old(source)


def rescale(
    spark: SparkSession, old: str | os.PathLike[str] | Location, new: str | os.PathLike[str] | Location, partitions: int
) -> RescaleReport:
    """Prepare ``new`` so that the next run on it continues the job of ``old`` with ``partitions`` shuffle
    partitions (see the module's description). ``old`` is only read."""
    started = time.monotonic()
    checkpoint = check_rescale(old, new, partitions)
    source, target = checkpoint.location, location(new)
    staging = target.parent / f".{target.name}.rescaling"
    staging.remove()  # what an interrupted rescale left
    try:
        new_keys = balanced_bucket_keys(checkpoint.buckets, partitions)
        keys = dict(zip(checkpoint.bucket_keys, new_keys, strict=True))
        rows = _write_state(spark, checkpoint, keys, layout.rescale_state_dir(staging))
        carried = _copy_files(checkpoint, staging)
        run = {**checkpoint.run, "bucket_keys": list(new_keys)}
        layout.run_record(staging).write_atomically(json.dumps(run, indent=1))
        record = Rescaled(
            origin=source.uri,
            origin_batch=checkpoint.last_batch,
            from_partitions=checkpoint.partitions,
            partitions=partitions,
            batch_base=checkpoint.batch_base + checkpoint.last_batch + 1,
            watermark_ms=checkpoint.watermark_ms,
            input_offsets=checkpoint.input_offsets,
            carried_batches=carried,
            rows=rows,
        )
        layout.rescaled_file(staging).write_atomically(json.dumps(record.to_json(), indent=1))
        if target.exists():
            target.remove()  # an empty directory, checked before
        staging.replace(target)
    except BaseException:
        staging.remove()
        raise
    return RescaleReport(
        origin=source.uri,
        target=target.uri,
        from_partitions=checkpoint.partitions,
        partitions=partitions,
        buckets=checkpoint.buckets,
        origin_batch=checkpoint.last_batch,
        next_batch=record.batch_base,
        watermark=None if checkpoint.watermark_ms is None else format_iso(checkpoint.watermark_ms),
        rows=rows,
        control_records_carried=len(checkpoint.unread_control),
        seconds=round(time.monotonic() - started, 3),
    )


def _write_state(spark: SparkSession, old: OldCheckpoint, keys: dict[int, int], target: Location) -> dict[str, int]:
    """The old state at its last committed batch, re-keyed, as Parquet rows ``bucket, kind, number, blob`` (see
    ``EngineProcessor.handleInitialState``); returns the rows per kind. Spark does the work: state may be large."""
    from functools import reduce

    from pyspark.sql import functions as F

    query = layout.query_dir(old.location).uri
    variables = _state_variables(spark, query, old.location)

    def read(**options: str) -> DataFrame:
        reader = spark.read.format("statestore").option("path", query).option("batchId", str(old.last_batch))
        return reader.options(**options).load()

    old_key = F.col("key.bucket").alias("old")
    parts = [
        read(stateVarName="bucket").select(
            old_key, F.lit(INITIAL_INDEX).alias("kind"), F.lit(0).cast("long").alias("number"),
            F.col("value.blob").alias("blob"),
        ),
        read(readRegisteredTimers="true").select(
            old_key, F.lit(INITIAL_TIMER).alias("kind"), F.col("expiration_timestamp_ms").alias("number"),
            F.lit(None).cast("binary").alias("blob"),
        ),
    ]  # fmt: skip
    if "pages" in variables:  # a checkpoint from before pages keeps whole buckets in its index
        parts.append(
            read(stateVarName="pages").select(
                old_key, F.lit(INITIAL_PAGE).alias("kind"), F.col("user_map_key.page").alias("number"),
                F.col("user_map_value.blob").alias("blob"),
            )
        )  # fmt: skip
    mapping = spark.createDataFrame(sorted(keys.items()), "old int, bucket int")
    rows = reduce(lambda a, b: a.unionByName(b), parts).join(F.broadcast(mapping), "old", "left")
    rows.select("bucket", "kind", "number", "blob", "old").write.parquet(target.uri)
    written = spark.read.schema(STATE_DDL).parquet(target.uri)
    counted = written.groupBy("kind").agg(
        F.count(F.lit(1)).alias("rows"), F.min(F.when(F.col("bucket").isNull(), F.col("old"))).alias("unknown")
    )
    rows_by_kind = {int(row["kind"]): (int(row["rows"]), row["unknown"]) for row in counted.collect()}
    unknown = [found for _rows, found in rows_by_kind.values() if found is not None]
    if unknown:
        raise CheckpointIncomplete(
            str(old.location),
            f"its state has grouping key {min(unknown)}, expected one of the bucket keys in run.json "
            f"({len(keys)} buckets): run.json does not belong to this state",
        )
    names = {INITIAL_INDEX: "buckets", INITIAL_PAGE: "pages", INITIAL_TIMER: "timers"}
    return {name: rows_by_kind.get(kind, (0, None))[0] for kind, name in names.items()}


def _state_variables(spark: SparkSession, query: str, old: Location) -> set[str]:
    """The state variables of the old query's stateful operator, from Spark's state metadata."""
    metadata = spark.read.format("state-metadata").load(query).collect()
    if len(metadata) != 1 or "transformWithState" not in str(metadata[0]["operatorName"]):
        names = [str(row["operatorName"]) for row in metadata]
        raise CheckpointIncomplete(
            str(old), f"expected the state of one transformWithStateInPandas operator, got operators {names}"
        )
    properties = json.loads(metadata[0]["operatorProperties"])
    return {str(variable["stateName"]) for variable in properties.get("stateVariables", [])}


def _copy_files(old: OldCheckpoint, new: Location) -> int:
    """sparkcep's own files that go on from ``old`` to the checkpoint ``new``: batch metrics, the end-of-input
    flush mark, unread control records. Returns how many batch metrics were carried."""
    metrics = layout.metrics_dir(old.location).children(layout.BATCH_GLOB)
    for file in metrics:
        (layout.metrics_dir(new) / file.name).write_atomically(file.read_bytes())
    flushed = layout.flushed_file(old.location)
    if flushed.exists():
        layout.flushed_file(new).write_atomically(flushed.read_bytes())
    layout.control_dir(new).mkdir()
    # Written anew, not copied with their times: Spark's file source ignores files much older than the newest.
    for file in old.unread_control:
        (layout.control_dir(new) / file.name).write_atomically(file.read_bytes())
    return len(metrics)
