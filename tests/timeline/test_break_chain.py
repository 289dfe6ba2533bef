"""A chain whose middle record is missing from the log (reviewer's break pass)."""

from __future__ import annotations

from .test_model import lane, ran


def test_a_chain_with_a_missing_middle_record_is_still_one_chain():
    """GIVEN links 1, 3 and 4 of one chain, link 2's record missing (expired, or not
    written: its worker died before its release) THEN the links still share one chain
    label, the first run's (link 1 names link 2 as the one after it; link 3 names link 2
    as the one before it), and no link is labelled with the missing run as its head."""
    records = [ran("A", 0, 60, continued_by="B", link=1),
               ran("C", 121, 150, fence=3, continues="B", continued_by="D", link=3),
               ran("D", 151, 170, fence=4, continues="C", link=4)]
    bars = {b.run_id: b for b in lane(*records).bars}
    assert [(bars[r].chain, bars[r].link) for r in "ACD"] == [("A", 1), ("A", 3), ("A", 4)]
