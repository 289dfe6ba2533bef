"""Local development helpers: an embedded AWS emulator for tests and offline runs."""
