"""Known-bug switches: the eleven trigger-state defects of issue 14 and issue 33's
garbage message (#12), re-introduced one at a time so the explorer (``tests/explorer``)
can prove it finds each (private).

Empty in production: nothing in jobguard adds to :data:`ACTIVE`; only the explorer's
``--mutant NAME`` does, in its own process. Each name is checked at the one place its
defect lived, with a set lookup.
"""

from __future__ import annotations

__all__ = ["ACTIVE", "KNOWN", "on"]

KNOWN: dict[str, str] = {
    "release-prunes-from-old-read": "#1 a release deletes trigger items it saw failed at "
                                    "acquire time, whatever they are now",
    "force-release-erases-run": "#2 release --force writes neither the stuck run's "
                                "trigger nor its record",
    "paused-queue-retry-loops": "#3 a failed queued trigger of a paused job is retried, "
                                "not recorded paused",
    "lost-release-forgets": "#4 a release recognising its own landed attempt forgets the "
                            "wake receipt and follow-up",
    "coalesce-undo-strands": "#5 a follow-up whose send failed is taken off the lease row",
    "replace-displaced-retryable": "#6 REPLACE leaves the displaced trigger retryable (lost)",
    "lease-lost-is-done": "#7 a run that lost its lease ends its trigger done, and its "
                          "queue message is deleted",
    "queued-forgotten-early": "#8 a trigger on the queue is kept only dedup_window",
    "lease-row-grows": "#9 every skip leaves a mark on the lease row",
    "fence-restarts": "#10 a lease row without a fence starts again at 1; no high-water",
    "future-tick-runs": "#11 a far-future tick is accepted and kept only from now",
    "garbage-message-returned": "#12 a trigger-queue message that is no trigger is "
                                "returned to SQS (a batch item failure), not recorded: "
                                "it blocks its FIFO group until the DLQ",
}

ACTIVE: set[str] = set()


def on(name: str) -> bool:
    """True when the explorer switched ``name`` on (never in production)."""
    return bool(ACTIVE) and name in ACTIVE
