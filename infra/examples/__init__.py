"""Examples that the test suite runs (tests/infra/test_example.py)."""
