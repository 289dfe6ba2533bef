"""Fixtures of the tests that act as a user outside this repository."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._user import build_installed


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The wheel installed with ``[cdk,testing]`` into a venv outside the repository;
    yields its bin/ (built once a session, shared by every user test)."""
    yield from build_installed(tmp_path_factory)
