"""Let ``python -m jobrun.cli`` run the ``jobrun`` command, as it did when cli was one module."""

from jobrun.cli import main

if __name__ == "__main__":
    main()
