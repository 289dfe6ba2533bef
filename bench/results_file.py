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
    old_met = old_meta.get("targets_met") if isinstance(old_meta.get("targets_met"), dict) \
        else {}
    merged["meta"] = {**old_meta, **meta,
                      "targets_met": {**old_met, **meta.get("targets_met", {})}}
    return merged
