"""Run ids: unique per attempt and sortable by start time (ULID layout)."""

from __future__ import annotations

import hashlib
import os

__all__ = ["keyed_run_id", "new_run_id", "run_id_bounds"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def new_run_id(epoch_ms: int) -> str:
    """A 26-character id: 48 bits of milliseconds, then 80 random bits.

    Ids of runs started in a later millisecond sort after earlier ones, so a job's
    run records list newest first with a plain descending key query.

    Example:
        >>> len(new_run_id(1_764_400_000_000))
        26
    """
    return _encode((epoch_ms << 80) | int.from_bytes(os.urandom(10), "big"))


def keyed_run_id(epoch_ms: int, key: str) -> str:
    """A run id like :func:`new_run_id`'s whose 80 low bits come from ``key`` (SHA-256)
    instead of chance: the same ``(epoch_ms, key)`` always gives the same id, so a record
    written under it by a conditional put is written once however often it is retried
    (a rejected trigger-queue message: its first receive time and its message id).

    Example:
        >>> keyed_run_id(1_764_400_000_000, "m-1") == keyed_run_id(1_764_400_000_000, "m-1")
        True
    """
    low = int.from_bytes(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:10],
                         "big")
    return _encode((max(0, min(epoch_ms, _MAX_MS)) << 80) | low)


def run_id_bounds(from_ms: int, to_ms: int) -> tuple[str, str]:
    """The lowest id a run started at ``from_ms`` can have and the highest one of a run
    started at ``to_ms``: the sort-key range of the runs started between them.

    Example:
        >>> low, high = run_id_bounds(1_764_400_000_000, 1_764_400_060_000)
        >>> low <= new_run_id(1_764_400_030_000) <= high
        True
    """
    low = max(0, min(from_ms, _MAX_MS))
    high = max(0, min(to_ms, _MAX_MS))
    return _encode(low << 80), _encode((high << 80) | ((1 << 80) - 1))


_MAX_MS = (1 << 48) - 1


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))
