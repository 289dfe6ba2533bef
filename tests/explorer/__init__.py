"""The protocol explorer: a deterministic simulator of the real library (see sim.py)."""
