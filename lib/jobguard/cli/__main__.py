"""``python -m jobguard.cli``: the ``jobguard`` command (``jobguard._launch`` has taken the
working folder off ``sys.path`` by now). Changes only if the way the package is run does."""

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
