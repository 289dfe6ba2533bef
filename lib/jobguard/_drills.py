"""Whether this function is a drill deployment's, and applying drill switches if so.

A drill deployment (``-c jobguard:drills=true``) sets ``JOBGUARD_DRILLS=1`` on every
function; the library then installs the job's drill fault switches
(:mod:`jobguard.drill.switches`) when a guarded job is built, and
:meth:`jobguard.definitions.JobDefinition.as_deployed` picks the drill clock. Handlers
carry no drill code, and a production code asset carries no ``jobguard.drill``: it is
imported only when the variable says so. The variable and its reading are
:data:`jobguard.environment.DRILLS` and :func:`jobguard.environment.drills` (re-exported
here as ``DRILLS`` and ``enabled``), where the definitions and the switches read it too.
"""

from __future__ import annotations

from .environment import DRILLS
from .environment import drills as enabled

__all__ = ["DRILLS", "apply", "enabled"]


def apply(job: str) -> bool:
    """Honour ``job``'s drill switches in this process if drills are enabled (else
    nothing is imported). Idempotent."""
    if not enabled():
        return False
    from .drill import switches

    return switches.install(job)
