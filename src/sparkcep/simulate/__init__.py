"""Deterministic simulators of realistic input streams, written as JSON-lines part files.

``generate_orders`` writes order fulfilment events and ``generate_devices`` device telemetry. Both
emit their events in event-time order, then let a share arrive late within ``max_delay_ms`` and
redeliver a share byte-identically, as real event buses do. Output is ``part-00000.jsonl`` ... with
increasing modification times (the order Spark's file source reads them in) and a ``_simulation.json``
summary that Spark ignores because of its leading underscore.

The same arguments always produce byte-identical files.
"""

from __future__ import annotations

from sparkcep.simulate.devices import generate_devices
from sparkcep.simulate.orders import generate_orders
from sparkcep.simulate.transactions import generate_transactions
from sparkcep.simulate.writer import SimulationSummary

__all__ = ["SimulationSummary", "generate_devices", "generate_orders", "generate_transactions"]
