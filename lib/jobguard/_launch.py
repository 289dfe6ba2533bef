"""``python -m jobguard.cli``: the working folder taken off the front of ``sys.path``.

For ``python -m`` Python puts the working folder first on ``sys.path`` (unless ``-P``,
``-I`` or ``PYTHONSAFEPATH`` is given, Python 3.11+). The operator's command then runs in
a folder nobody vouches for (a shared temp folder, a checkout, a CI workspace), and a
``boto3.py``, ``json.py`` or ``handlers/`` there would replace the real package, running
with the operator's AWS credentials. ``jobguard/__init__.py`` imports this module first,
before anything else, and it calls :func:`drop_implicit_cwd` while ``python -m``
is still looking for ``jobguard.cli`` (this module does it when imported); only for that
module, so nobody else's ``python -m`` loses its folder.

What it cannot cover: the few standard modules Python imports for ``-m`` before any
jobguard code runs (``runpy``'s own imports: ``contextlib``, ``warnings``, ...). The
console script ``jobguard`` (its ``sys.path[0]`` is its own ``bin`` folder) and
``python -P -m jobguard.cli`` never look in the working folder at all.
"""

# Only modules Python has loaded before ``-m`` runs anything (no ``from __future__``, no
# ``typing``: an import here would itself be looked for in the working folder).
import os
import sys

__all__ = ["drop_implicit_cwd", "python_m_target"]

CLI_MODULES = frozenset({"jobguard.cli"})
"""The modules whose ``python -m`` gets the working folder taken off ``sys.path``."""

_TAKES_VALUE = "cmWX"  # the interpreter's one-letter options that take a value


def python_m_target(orig_argv: list[str]) -> str | None:
    """The module ``python -m`` runs, read from the interpreter's own command line
    (``sys.orig_argv``) as the interpreter reads it; None for a script or ``-c``.

    Example:
        >>> python_m_target(["python", "-X", "importtime", "-Bm", "jobguard.cli", "status"])
        'jobguard.cli'
    """
    args = iter(orig_argv[1:])
    for arg in args:
        if arg == "--check-hash-based-pycs":
            next(args, None)
            continue
        if arg.startswith("--"):
            continue
        if not arg.startswith("-") or arg == "-":
            return None  # a script, or stdin: no -m
        flags = arg[1:]
        for index, flag in enumerate(flags):
            if flag in _TAKES_VALUE:
                value = flags[index + 1:] or next(args, None)
                if flag == "m":
                    return value
                if flag == "c":
                    return None
                break
    return None


def drop_implicit_cwd(path: list[str] | None = None, *,
                      orig_argv: list[str] | None = None,
                      safe_path: bool | None = None) -> bool:
    """Remove the working folder Python put at ``path[0]`` for ``python -m jobguard.cli``.

    Returns True when it removed it. Nothing changes under ``-P``/``PYTHONSAFEPATH``
    (there is no such entry), for any other ``-m`` module, or when ``path[0]`` is
    something else.
    """
    path = sys.path if path is None else path
    orig_argv = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    safe_path = bool(getattr(sys.flags, "safe_path", False)) if safe_path is None \
        else safe_path
    if safe_path or python_m_target(orig_argv) not in CLI_MODULES or not path:
        return False
    try:
        cwd = os.getcwd()
    except OSError:  # the folder was removed: nothing can be imported from it either
        return False
    if path[0] in ("", cwd):
        del path[0]
        return True
    return False


if sys.argv[:1] == ["-m"]:  # imported while `python -m` is still looking for its module
    drop_implicit_cwd()
