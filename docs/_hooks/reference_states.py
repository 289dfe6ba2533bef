"""The protocol page's state diagram, drawn from ``jobguard.trigger_state.TRANSITIONS``
(the protocol's specification) each time the site is built, so
the picture cannot say anything the table does not."""

from __future__ import annotations


def edges() -> dict[tuple[str, str], list[str]]:
    """Each (from, to) pair of the table with its events, in the table's order; a trigger
    with no live item (never seen, past its TTL, or its queueing undone) is ``[*]``."""
    from jobguard.trigger_state import TRANSITIONS

    found: dict[tuple[str, str], list[str]] = {}
    for t in TRANSITIONS:
        source = "[*]" if t.source is None else t.source.value
        target = "[*]" if t.target is None else t.target.value
        events = found.setdefault((source, target), [])
        label = t.event.value.replace("_", " ")
        if label not in events:
            events.append(label)
    return found


def trigger_states() -> str:
    lines = ["```mermaid", "stateDiagram-v2"]
    lines += [f"    {source} --> {target}: {', '.join(events)}"
              for (source, target), events in edges().items()]
    return "\n".join([*lines, "```"]) + "\n"
