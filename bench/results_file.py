"""``bench/results.json`` is written by several parts: the full bench, its
``--timeline-only`` and ``--faults-load-only`` sections, ``make explore`` and ``make
mutate``. This module (standard library only, no hooks installed on import) merges one
part's figures into it."""

from __future__ import annotations

from typing import Any

__all__ = ["merge_results"]


def merge_results(previous: dict[str, Any], figures: dict[str, Any],
                  meta: dict[str, Any]) -> dict[str, Any]:
    """The full bench's figures and meta laid over what the results file already holds:
    what other parts wrote (the explorer's and mutation testing's figures, a
    ``--timeline-only`` or ``--faults-load-only`` run, ``meta.mutation``) is kept; a
    figure or target this run measured replaces its old value."""
    merged = {**previous, **figures}
    old_meta = previous.get("meta") if isinstance(previous.get("meta"), dict) else {}
    merged_meta = dict(old_meta)
    for key, value in meta.items():  # one level down: stage_s, targets_met...
        before = old_meta.get(key)
        merged_meta[key] = ({**before, **value} if isinstance(before, dict)
                            and isinstance(value, dict) else value)
    merged["meta"] = merged_meta
    return merged
