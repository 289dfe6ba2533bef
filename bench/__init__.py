"""jobguard benchmarks: AWS requests per decision, contention, cold start.

Run with ``python -m bench.run`` (or ``make bench``); see ``bench/README.md``.
"""
