"""``python -m sparkcep.testing``: the reference evaluator over a directory (see sparkcep.testing.cli)."""

from sparkcep.testing.cli import main

if __name__ == "__main__":  # importing the module (as the test of the exception tree does) runs nothing
    raise SystemExit(main())
