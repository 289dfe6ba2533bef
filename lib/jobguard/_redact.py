"""The redaction hook: what a job's error texts and record excerpts pass through before
jobguard writes or logs them.

Exception text is someone else's words: a remote API's error body, a connection string,
a token in a URL. A job that may meet such text gives its config ``redact``, a function
from the text to the text to keep (``JobConfig(redact=...)``,
``JobDefinition(redact=...)``). jobguard applies it to the whole text, then bounds it:
to a run record's ``error``, an item's ``last_error``, a rejected record's or trigger
message's ``error`` and excerpt, a run's ``rejected_first`` and
``written_on_failure``, a recovery plan's ``rejected_sample``, and every log line that
carries such text. A hook that raises, or returns something that is not a string, is
never a reason to write the text it was given: :data:`FAILED` is written instead.

Example:
    >>> import re
    >>> hide = lambda text: re.sub(r"token=\\S+", "token=<hidden>", text)
    >>> redacted("RuntimeError: token=SECRET123 refused", hide)
    'RuntimeError: token=<hidden> refused'
    >>> redacted("token=SECRET123", lambda text: text.decode())
    '<redaction failed: AttributeError>'
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from .errors import ConfigError

__all__ = ["FAILED", "Redactor", "check_redactor", "error_text", "redact_raised", "redacted"]

Redactor = Callable[[str], str]
"""A redaction hook: the text in, the text to keep out."""

FAILED = "<redaction failed: {kind}>"
"""What is written instead of a text whose redaction failed: the hook's exception type
(never its message, which may quote the text), or what it returned."""


def check_redactor(value: object, field: str = "redact") -> None:
    """Refuse a hook that cannot be called, naming ``field`` (at definition time)."""
    if value is not None and not callable(value):
        raise ConfigError(field, "must be a function taking the text and returning the text "
                          f"to keep (str -> str), or None; got a {type(value).__name__}")


def redacted(text: str | None, redact: Redactor | None) -> str | None:
    """``text`` through ``redact`` (unchanged without one; None stays None). A hook that
    raises or returns no string gives :data:`FAILED`, never the text."""
    if text is None or redact is None:
        return text
    if isinstance(text, _Redacted):
        return str(text)  # the hook's answer already (an error rewritten in place)
    try:
        kept = redact(text)
    except Exception as exc:  # noqa: BLE001 - the hook's failure: the placeholder, not the text
        return FAILED.format(kind=type(exc).__name__)
    if not isinstance(kept, str):
        return FAILED.format(kind=f"returned {type(kept).__name__}")
    return kept


class _Redacted(str):
    """A text already through the hook (:func:`error_text` of an error that
    :func:`redact_raised` rewrote): :func:`redacted` does not pass it again, so every copy
    of the error (the one Lambda logs, the run record's) is the hook's answer once."""


_MARK = "_jobguard_redacted"


def redact_raised(error: BaseException, redact: Redactor | None) -> None:
    """Put the message of an error jobguard raises on its own (a write that failed) through
    the hook, in place, once, before it leaves jobguard; and the messages of the errors it
    was raised from (``raise ... from``: the SDK's error, the same words). The error a
    handler raised is its own, and goes to Lambda as it was."""
    if redact is None:
        return
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if not getattr(current, _MARK, False):
            try:
                text = str(current)
            except Exception:  # noqa: BLE001 - a message that cannot be read is not kept
                text = ""
            current.args = (str(redacted(text, redact)),)
            with contextlib.suppress(AttributeError, TypeError):  # one taking no attribute
                setattr(current, _MARK, True)
        current = current.__cause__


def error_text(error: BaseException | str) -> str:
    """What a record says of an error: ``Type: message`` (a string as it is; an
    exception whose message cannot be read, its type)."""
    if isinstance(error, str):
        return error
    try:
        text = f"{type(error).__name__}: {error}"
    except Exception:  # noqa: BLE001 - an error whose text cannot be read
        return f"{type(error).__name__}: <its message cannot be read>"
    return _Redacted(text) if getattr(error, _MARK, False) else text
