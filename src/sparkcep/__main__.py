"""``python -m sparkcep``: the same as the ``sparkcep`` command (what ``spark-submit`` can be given). Part of the
command line: nothing imports it."""

from sparkcep.cli.app import main

if __name__ == "__main__":
    main()
