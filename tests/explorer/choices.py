"""The one source of every choice a history makes.

A history is a list of small integers (the choice list). Drawn at random from a seed,
or replayed from a list: the same list always gives the same history. Index 0 of every
draw is its simplest option ("step the first actor", "no fault"), so shrinking a list
(deleting entries, lowering values) simplifies the history it describes. A replayed list
that runs out answers 0 from then on, and the fault phase ends.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


class Chooser:
    """Draws choices from a seeded ``random.Random``, or replays a recorded list."""

    def __init__(self, seed: int | None = None, replay: Sequence[int] | None = None,
                 *, budget: int = 0) -> None:
        self.rng = random.Random(seed) if replay is None else None
        self.replay = list(replay) if replay is not None else None
        self.budget = budget
        self.pos = 0
        self.record: list[int] = []
        self.quiet = False
        """In the quiet phase (faults stopped) every draw answers 0 and is not recorded."""

    @property
    def exhausted(self) -> bool:
        if self.replay is not None:
            return self.pos >= len(self.replay)
        return len(self.record) >= self.budget

    def draw(self, n: int, weights: Sequence[float] | None = None) -> int:
        """An integer in ``[0, n)``; ``weights`` bias random draws (never replays)."""
        if n <= 1 or self.quiet:
            return 0
        if self.replay is not None:
            value = self.replay[self.pos] if self.pos < len(self.replay) else 0
            self.pos += 1
            value = min(max(value, 0), n - 1)
        else:
            assert self.rng is not None
            if weights is None:
                value = self.rng.randrange(n)
            else:
                value = self.rng.choices(range(n), weights=weights[:n])[0]
        self.record.append(value)
        return value

    def chance(self, p: float) -> bool:
        """True with probability ``p`` (1 is the unusual answer)."""
        return self.draw(2, [1.0 - p, p]) == 1
