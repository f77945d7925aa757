"""Let ``python -m jobrun`` run the ``jobrun`` command, e.g. where no script is on PATH."""

from jobrun.cli import main

if __name__ == "__main__":
    main()
