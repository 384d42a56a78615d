"""The stateful processor as it was before pages: each bucket's whole state in one value (snapshot version 3).

Tests run it to write a checkpoint the way sparkcep did until 2026-11-24, then resume that checkpoint with
today's processor. Spark ships this module's code to its Python workers by value (they cannot import tests/).
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle, TimerValues

from sparkcep.core.bucket_state import BucketState
from sparkcep.core.engine import NO_WATERMARK
from sparkcep.core.pages import BucketIndex, PageTraffic
from sparkcep.spark.processor import STATE_SCHEMA, EngineProcessor, _engine_for, result_frame

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class WholeBucketProcessor(EngineProcessor):
    """One ``ValueState`` per bucket holding a pickled :class:`BucketState`; no pages."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._state = handle.getValueState("bucket", STATE_SCHEMA)

    def _run(
        self,
        pairs: list[tuple[int, str]],
        timer_values: TimerValues,
        fired: int | None,
        safe_bound: int = NO_WATERMARK,
        origins: dict[str, str] | None = None,
        read_time: int | None = None,
        times: list[int | None] | None = None,
    ) -> Any:
        spark_watermark = timer_values.getCurrentWatermarkInMs()
        watermark = spark_watermark if spark_watermark > 0 else NO_WATERMARK
        stored = self._state.get()
        state = BucketState.from_bytes(stored[0]) if stored is not None else BucketState()
        if fired is not None and state.registered_timer == fired:
            state.registered_timer = None
        engine = _engine_for(self._rules_json)
        result = engine.process(state, pairs, watermark, safe_bound, origins, times)
        wake = state.next_wakeup()
        if wake != state.registered_timer:
            if state.registered_timer is not None:
                self._handle.deleteTimer(state.registered_timer)
            if wake is not None:
                self._handle.registerTimer(wake)
            state.registered_timer = wake
        if state.keys:
            self._state.update((state.to_bytes(),))
        elif stored is not None:
            self._state.clear()
        return result_frame(result, engine.program, watermark, BucketIndex(), PageTraffic(), 0.0, origins, read_time)
