"""Every AWS call site x every fault, in the middle of a real crm-sync run.

The S3 destination's two sites run the same job with its notes written as objects in a
versioned bucket (an ``S3Destination``-backed BatchJob); the operator commands' sites
are in ``test_operator_matrix``.

Each cell injects one fault at one call site (see ``_scenario`` for the run), then
checks: the fault was injected there; ONCE, END, FENCE and CKPT hold; the run log says
what happened, as the site's declared handling promises; nothing is left claimed.
"""

from __future__ import annotations

import pytest

from jobguard.callsites import Fault, Handling, all_sites
from jobguard.faults import Rule

from ._scenario import FAULTS, run_scenario

SITES = {s.name: s for s in all_sites()}

# Sites reached by the run scenario, and what must fail first for a site to be reached.
RUN_PATH = {
    "dynamodb.acquire": [],
    "dynamodb.renew": [],
    "dynamodb.release": [],
    "dynamodb.record_decision": [],
    "dynamodb.set_wake": [],
    "items.read_row": [],
    "items.lookup": [],
    "items.write_facts": [],
    "items.commit": [],
    # failed and uncertain rows go with the job row in a transaction: a known failure at
    # the destination (a throttled put) makes the first
    "items.commit_rows": [Rule(Fault.THROTTLE, site="destination.dynamodb.put", nth=2)],
    "queue.send": [],
    "queue.defer": [],
    "queue.wake": [],
    "destination.dynamodb.put": [],
    "destination.dynamodb.reconcile": [],
    # The same run with its notes written as S3 objects (an S3Destination-backed job).
    "destination.s3.put": [],
    "destination.s3.head": [],
}
S3_SITES = {"destination.s3.put", "destination.s3.head"}
# Sites the run makes its own (a failure there is R1's); the others belong to the second
# trigger, the follow-up delivery, or the companions above.
R1_SITES = {"dynamodb.put_run", "dynamodb.renew", "dynamodb.release", "items.read_row",
            "items.lookup", "items.write_facts", "items.commit", "items.commit_rows",
            "destination.dynamodb.put",
            "destination.dynamodb.reconcile", "queue.wake", *S3_SITES}


# Cells whose follow-up is not run within this test: a deferred message that was not
# woken (or whose deferral failed) comes back when its visibility timeout ends, real
# seconds later. (Two faults in a row on a coalesce decision, the send then its
# compensation, or a lost decision then the read that recognises it, leave the mark
# without a message: the releasing run sends it again, so those cells are on time.)
FOLLOW_UP_LATE = {
    *((s, f) for s in ("dynamodb.set_wake", "queue.defer", "queue.wake")
      for f in (Fault.THROTTLE, Fault.SERVER_ERROR, Fault.TIMEOUT)),
}
# A failed delivery of a queue message is reported to the event source mapping, which
# delivers it again (the error never reaches a caller).
SQS_REDELIVERS = {"dynamodb.set_wake", "queue.defer"}
# A COALESCE decision whose follow-up message could not be sent stands: the follow-up is
# named on the lease row and the holder's release sends it (the sender sees no error).
RELEASE_RESENDS = {"queue.send"}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.value for f in FAULTS])
@pytest.mark.parametrize("site", sorted(RUN_PATH))
def test_cell(site: str, fault: Fault) -> None:
    rules = [Rule(fault, site=site, nth=1), *RUN_PATH[site]]
    out = run_scenario(rules, destination="s3" if site in S3_SITES else "dynamodb")
    handling = SITES[site].on(fault)

    # The fault landed where the cell says.
    assert any(c.site == site and c.fault is fault for c in out.faults.injected), \
        out.faults.summary()
    # ONCE, END, FENCE, CKPT, nothing claimed by nobody, the lease free at the end.
    assert out.invariants.violations == [], out.invariants.violations
    assert {"ONCE", "END", "FENCE", "CKPT"} <= set(out.invariants.checked)
    # The run log says what happened.
    assert out.r1 is not None, [(r.run_id, r.status.value) for r in out.runs]
    statuses = [r.status.value for r in out.runs]
    # R0 is on the log exactly once: its own record, or (best effort failed) named by R1.
    # (written in the takeover's own transaction: no fault elsewhere can lose it)
    assert statuses.count("abandoned") == 1, statuses
    assert out.r1.extra.get("displaced_run_id") == "R0", out.r1.extra
    if site in R1_SITES and handling in (Handling.RETRY, Handling.UNCERTAIN):
        # finished; `incomplete` when an item was left uncertain or failed (the status
        # never hides item trouble), `succeeded` otherwise
        troubled = out.r1.extra.get("failed", 0) or out.r1.extra.get("uncertain", 0)
        assert out.r1.status.value == ("incomplete" if troubled else "succeeded"), \
            (out.r1, out.errors)
        assert "t1" not in out.errors
    if handling is Handling.STOP:
        failed = [r for r in out.runs if r.status.value == "failed"]
        assert failed and failed[0].error, statuses
    if handling is Handling.UNCERTAIN:
        assert out.r1.extra.get("uncertain", 0) >= 1, out.r1.extra
        assert out.r1.status.value == "incomplete", out.r1
    if site.startswith("destination.") and site.endswith(".put"):
        # A refused put applied nothing: the item is failed (reported), not uncertain;
        # a resend refused by its own write returns the stored id (nothing uncertain).
        if handling is Handling.SURFACE:
            assert (out.r1.extra.get("failed"), out.r1.extra.get("uncertain", 0)) == (1, 0), \
                out.r1.extra
        if handling is Handling.RETRY:
            assert out.r1.extra.get("uncertain", 0) == 0, out.r1.extra
    if (site, fault) == ("destination.s3.put", Fault.LOST):
        # The resend was refused (412) and the stored object's id read back.
        assert out.faults.calls_at("destination.s3.head"), out.faults.summary()
    if handling is Handling.SURFACE and site not in R1_SITES | SQS_REDELIVERS | RELEASE_RESENDS:
        assert out.errors, "the sender should have seen the error"
    # COALESCE's promise: the second tick is served once: by one follow-up run, or (its
    # decision surfaced an error and the retry came after R1) by running itself.
    log = [(r.trigger_id, r.trigger_kind, r.status.value) for r in out.runs]
    # (a follow-up message sent again, by a release or a coalesced trigger's retry, is
    # recorded `duplicate` once the follow-up has run: runs are what count)
    follow_ups = [r for r in out.runs if r.trigger_kind == "follow_up"
                  and r.decision.value == "ran"]
    t2_ran = any(r.trigger_id.endswith(out.t2_id) and r.decision.value == "ran"
                 for r in out.runs)
    assert len(follow_ups) + t2_ran <= 1, log
    if (site, fault) not in FOLLOW_UP_LATE:
        assert len(follow_ups) + t2_ran == 1, log
    # The second tick: recorded coalesced; a duplicate only for a redelivery.
    t2 = out.records_for(out.first_answers["t2"]["trigger_id"]) if out.first_answers.get(
        "t2") else []
    assert all(r.decision.value != "duplicate" or "t2" in out.errors for r in t2), t2
