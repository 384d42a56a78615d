"""``python -m sparkcep.testing``: the reference evaluator over a directory (see sparkcep.testing.cli)."""

from sparkcep.testing.cli import main

raise SystemExit(main())
