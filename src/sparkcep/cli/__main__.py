"""``python -m sparkcep.cli``: the same as the ``sparkcep`` command."""

from sparkcep.cli.app import main

main()
