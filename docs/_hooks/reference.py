"""MkDocs hook: the reference pages' generated parts (filled in as each one lands)."""
