"""``make docs`` is a check, not only a build: the command the Makefile runs fails on a
broken link or anchor and on a page the navigation leaves out (that it passes on the
site as it is, make test's own ``make docs`` shows). mkdocs counts warnings for --strict
only when it logs them: a ``--quiet`` build once passed with a broken anchor."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.process  # mkdocs, as make runs it


def _docs_command() -> list[str]:
    """The Makefile's docs recipe, as argv (its environment prefix left to _build)."""
    make = (ROOT / "Makefile").read_text()
    (recipe,) = re.findall(r"^docs: .*\n\t(.+)$", make, re.M)
    words = shlex.split(recipe.replace("$(VENV)/bin/", str(Path(sys.executable).parent) + "/"))
    return [w for w in words if "=" not in w or w.startswith("-")]


def _build(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(site / "lib"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(_docs_command(), cwd=site, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A copy of what the site is built from."""
    for name in ("docs", "lib"):
        shutil.copytree(ROOT / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_recipe_is_strict_and_not_quiet() -> None:
    argv = _docs_command()
    assert argv[-2:] == ["build", "--strict"] or "--strict" in argv, argv
    assert not {"-q", "--quiet"} & set(argv), argv


@pytest.mark.parametrize("breakage", ["anchor", "page", "unlisted"])
def test_a_broken_link_or_an_unlisted_page_fails_the_build(site: Path, breakage: str) -> None:
    page = site / "docs" / "how-to" / "operate.md"
    if breakage == "anchor":
        page.write_text(page.read_text() + "\nSee [the runbook](#no-such-section).\n")
    elif breakage == "page":
        page.write_text(page.read_text() + "\nSee [a page](no-such-page.md).\n")
    else:
        (site / "docs" / "how-to" / "forgotten.md").write_text("# Forgotten\n")
    done = _build(site)
    assert done.returncode != 0, f"make docs passed with a {breakage} broken"
    assert "WARNING" in done.stderr
