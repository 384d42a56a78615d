"""A job's metrics for Prometheus, read from its checkpoint: the collector (served by the console at
``/metrics``) and a stand-alone endpoint for ``sparkcep run --metrics-port``. docs/production.md lists the
metrics; docs/grafana-dashboard.json is a dashboard over them.
"""

from __future__ import annotations

from sparkcep.prometheus.collector import CheckpointCollector
from sparkcep.prometheus.server import DEFAULT_HOST, MetricsServer, serve_metrics

__all__ = ["DEFAULT_HOST", "CheckpointCollector", "MetricsServer", "serve_metrics"]
