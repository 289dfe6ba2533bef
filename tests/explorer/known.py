"""Which issue-14 behaviour (or issue 33's #12) a violation's signature shows (for the
explorer's summary).

A signature is ``INVARIANT/what:key``; the key of ``END/queued-never-ran`` is the
trigger's records in order (``queued>ran:lease_lost>duplicate``; ``+1h`` on a record
written over an hour after the one before, ``model.AGED_MS``). The mapping reads the
shape, not the ids; it was checked against the shrunk trace of each regression history
(``regressions.py``). A signature it does not know is reported as possibly new.
"""

from __future__ import annotations

import re

BUGS = {
    1: "a queued trigger deleted by a release",
    2: "force release erases the stuck run",
    3: "paused job, failed queued trigger loops",
    4: "a lost release response forgets its wake/follow-up",
    5: "COALESCE (or QUEUE) undo strands triggers / leaves a second record",
    6: "REPLACE re-runs the displaced trigger",
    7: "a queued trigger whose run lost its lease is never run",
    8: "a failed queued trigger's retry dropped once its mark ages out",
    9: "the lease row grows without bound",
    10: "a damaged lease row wedges or crashes the job",
    11: "a trigger redelivered after its mark aged out runs twice (far-future tick, manual)",
    12: "a trigger-queue message that is no trigger is returned, blocking its group "
        "(issue 33)",
    13: "a chain's next link takes the lease without its hand-off (issue 30)",
}

_RULES: list[tuple[str, int]] = [
    (r"^END/queued-never-ran:.*ran:lease_lost", 7),
    # its mark aged out (``+1h``: over an hour after its last record) before it came back
    (r"^END/queued-never-ran:(.*>)?queued>(ran:failed(\+1h)?>)?(duplicate|dropped)\+1h", 8),
    # ... or, minutes after, it was gone: deleted by a release
    (r"^END/queued-never-ran:(.*>)?queued>(ran:failed(\+1h)?>)?(duplicate|dropped)", 1),
    (r"^END/queued-never-ran:.*ran:failed>queued>duplicate", 1),
    (r"^BOUND/queued_n", 1),
    (r"^END/no-run-record", 2),
    (r"^RERUN/ran-again:[a-z_-]+:returned-lease_lost", 2),
    (r"^RERUN/ran-again:[a-z_-]+:released", 2),
    (r"^END/failed-unfaulted:(queued|follow_up):StoreError", 3),
    (r"^LIVE/wake-lost", 4),
    (r"^END/coalesced-never-followed", 5),
    (r"^END/recorded-twice:(coalesced|queued)", 5),
    (r"^RERUN/ran-again:[a-z_-]+:displaced", 6),
    (r"^BOUND/row-(size|per-trigger)", 9),
    (r"^(FENCE/reissued|FENCE/no-fence|FENCE/stale-write|END/crash|DAMAGE/)", 10),
    (r"^RERUN/ran-again:(far-future-tick|manual):returned-ran", 11),
    (r"^RERUN/ran-again:far-future-tick:", 11),
    (r"^(END/garbage-|LIVE/behind-garbage)", 12),
    (r"^CHAIN/", 13),
]


def bug_of(signature: str) -> int | None:
    """The issue-14 behaviour number a signature shows, or None (possibly new)."""
    for pattern, bug in _RULES:
        if re.search(pattern, signature):
            return bug
    return None
