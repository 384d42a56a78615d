"""The JVM: out of memory, or gone while Spark was starting."""

from __future__ import annotations

import re

from sparkcep.diagnose.verdict import Diagnosis, Where

_JAVA_OOM = re.compile(r"java\.lang\.OutOfMemoryError: ([^\n]+)")


def jvm_rule(text: str, where: Where) -> Diagnosis | None:
    oom = _JAVA_OOM.search(text)
    if oom is not None:
        return out_of_memory(f"Java: {oom.group(1).strip()}")
    if "JAVA_GATEWAY_EXITED" in text:
        fix = "check that 'java -version' shows Java 17 or 21 and that JAVA_HOME, if set, points at it"
        return Diagnosis("Java exited while Spark was starting", fix)
    return None


def out_of_memory(which: str) -> Diagnosis:
    fix = (
        "give the driver more memory (spark.driver_memory in a pipeline file) or make micro-batches smaller "
        "(--max-files-per-trigger, max_records_per_batch), then run the same command again"
    )
    return Diagnosis(f"out of memory ({which})", fix)
