"""``jobguard drill``: the seed's failure cases, run on purpose against a deployed stack.

:mod:`.switches` is what a deployed job imports (light: no AWS client until a switch is
read); :mod:`.drills`, :mod:`.stack` and :mod:`.runner` are the drill side.
"""

from . import switches as switches

__all__ = ["switches"]
