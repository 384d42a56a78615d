"""The ``sparkcep`` command line: ``app`` (run, simulate, backtest, demo), ``rules``, ``patterns``, ``console``.

The outermost layer: nothing else in the package imports it (tests/test_architecture.py).
"""

from sparkcep.cli.app import main

__all__ = ["main"]
