"""Run ids: unique per attempt and sortable by start time (ULID layout)."""

from __future__ import annotations

import os

__all__ = ["new_run_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def new_run_id(epoch_ms: int) -> str:
    """A 26-character id: 48 bits of milliseconds, then 80 random bits.

    Ids of runs started in a later millisecond sort after earlier ones, so a job's
    run records list newest first with a plain descending key query.

    Example:
        >>> len(new_run_id(1_764_400_000_000))
        26
    """
    value = (epoch_ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
