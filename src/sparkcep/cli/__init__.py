"""The ``sparkcep`` command line: one module per command (``run``, ``simulate``, ``backtest``, ``rules``, ...),
assembled into one root group in ``app``.

The outermost layer: nothing else in the package imports it (tests/test_architecture.py).
"""

from sparkcep.cli.app import main

__all__ = ["main"]
