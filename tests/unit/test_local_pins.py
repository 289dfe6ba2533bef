"""The local AWS the Makefile installs is the one the code and the docs describe."""

from __future__ import annotations

import re
from pathlib import Path

from jobguard.local import ministack
from tests._docs import docs_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_makefile_installs_the_pinned_ministack() -> None:
    makefile = (ROOT / "Makefile").read_text()
    pinned = re.search(r"^MINISTACK_VERSION := (\S+)$", makefile, re.M)
    assert pinned is not None and pinned.group(1) == ministack.VERSION
    assert "ministack==$(MINISTACK_VERSION)" in makefile
    lock = (ROOT / "requirements" / "ministack.lock").read_text()
    assert re.search(rf"^ministack=={re.escape(ministack.VERSION)}$", lock, re.M)
    assert f"MiniStack {ministack.VERSION}" in docs_text()


def test_the_local_aws_binds_loopback_only() -> None:
    # The default would listen on every interface; the launcher always sets the host.
    source = Path(ministack.__file__).read_text()
    assert '"BIND_HOST": "127.0.0.1"' in source and '"MINISTACK_HOST": "127.0.0.1"' in source
