"""``python -m detector``: the detector's command line (see :mod:`detector.cli`)."""

from detector.cli import main

main()
