"""A refused ``jobguard`` command: the error every command raises for what it will not do,
and the ``did you mean`` hint beside it. Changes when the way a refusal is said changes
(its fields, its exit status, its hint)."""

from __future__ import annotations

from collections.abc import Sequence


class CommandError(Exception):
    """A refused command: printed as ``error: <field>: <message>``, exit status 2 (1: the
    command was understood, and the table's state refuses it; nothing written)."""

    def __init__(self, field: str, message: str, *, code: int = 2) -> None:
        self.field = field
        self.code = code
        super().__init__(f"{field}: {message}")


def _nearest(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for the choice nearest ``word``, or nothing."""
    import difflib

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {found[0]!r}?" if found else ""
