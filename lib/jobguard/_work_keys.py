"""A work item's identity rules: how a source id becomes the key the ledger and the
destination see (kept as it is, escaped, or hashed), the key of a rejected record, and
how payload hashes are compared (private; :mod:`jobguard.workitems` exports them).

Its one reason to change is the key format: every row of the ledger and every
destination's idempotency key is written in it, so a change here is a migration.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["CLAIM_HASH_CHARS", "MAX_SOURCE_KEPT", "claim_hash", "payload_differs",
           "rejected_key", "source_key"]

_KEPT_MAX = 256
"""Bytes (UTF-8) of a source id kept as it is in the key; a longer one is hashed."""
_OPERATION = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
_NOT_PLAIN = re.compile(r"[\x00-\x1f\x7f#]")
_ESCAPED = re.compile(r"[\x00-\x1f\x7f#%]")
_HASHED = "#sha256:"
_REJECTED = "#rejected:"
MAX_SOURCE_KEPT = 1024
"""Bytes (UTF-8) of an escaped or hashed source id kept on its ledger rows."""


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _escape(source_id: str) -> str:
    """Percent-escape ``%``, ``#``, control characters and surrounding whitespace (as
    their UTF-8 bytes): what makes a source id unfit to be kept as it is."""
    body = source_id.strip()
    start = source_id.index(body) if body else len(source_id)
    head, tail = source_id[:start], source_id[start + len(body):]

    def pct(text: str) -> str:
        return "".join(f"%{b:02X}" for b in _utf8(text))

    return pct(head) + _ESCAPED.sub(lambda m: pct(m.group()), body) + pct(tail)


def _unescape(text: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "%":
            raw.append(int(text[i + 1:i + 3], 16))
            i += 3
        else:
            raw += text[i].encode("utf-8")
            i += 1
    return raw.decode("utf-8")


def source_key(source_id: str) -> str:
    """The source part of a work id's key (what the ledger and the destination see).

    - A *plain* source id (at most 256 bytes in UTF-8, no ``#``, no control character,
      no surrounding whitespace) is kept as it is: ``contact-42``.
    - Any other is escaped behind a leading ``#``: ``%``, ``#``, control characters and
      surrounding whitespace become ``%XX`` (their UTF-8 bytes), e.g.
      ``https://crm.example/c/42#notes`` -> ``#https://crm.example/c/42%23notes``.
    - One that is still longer than 256 bytes is hashed, and the original is kept on its
      ledger rows: ``#sha256:<64 hex digits of its UTF-8 bytes>``.

    The three forms never meet: a plain key has no ``#``, an escaped one always holds a
    ``%``, a hashed one never does.
    """
    if (len(_utf8(source_id)) <= _KEPT_MAX and not _NOT_PLAIN.search(source_id)
            and source_id == source_id.strip()):
        return source_id
    escaped = "#" + _escape(source_id)
    if len(escaped.encode("utf-8")) <= _KEPT_MAX:
        return escaped
    return _HASHED + hashlib.sha256(_utf8(source_id)).hexdigest()


def rejected_key(fingerprint: str) -> str:
    """The ledger key of a rejected record (no work id could be made for it): it never
    meets a work id's key (see :func:`source_key`)."""
    return f"{_REJECTED}{fingerprint}"



CLAIM_HASH_CHARS = 16
"""An open claim keeps this many leading characters of each item's payload hash: enough
to tell a reused work id from the same content, and the claim stays small (every write
to the job row is billed by the row's whole size)."""


def claim_hash(payload_hash: str | None) -> str:
    """The part of a payload hash an open claim keeps ('' for none)."""
    return (payload_hash or "")[:CLAIM_HASH_CHARS]


def payload_differs(stored: str | None, payload_hash: str | None) -> bool:
    """Whether a stored payload hash (whole, or an open claim's prefix of one) names
    other content than ``payload_hash``. Unknown on either side: not a difference."""
    if not stored or not payload_hash:
        return False
    return not payload_hash.startswith(stored) and not stored.startswith(payload_hash)
