"""The documentation as a reader meets it: the README and every page of the site in
``docs/`` (``mkdocs.yml``'s ``docs_dir``). Tests that hold the docs to the code read
them here, so that a section moving from one page to another keeps its checks."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The README, then every Markdown page of the site, in path order."""
    return [README, *sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)]


def docs_text() -> str:
    """Every page's text, one after another (a blank line between pages)."""
    return "\n\n".join(p.read_text() for p in pages())


def page(name: str) -> str:
    """One page's text, by its path from the repository's root (``docs/how-to/...``)."""
    return (ROOT / name).read_text()
