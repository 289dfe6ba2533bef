"""Tests that lay pages out in headless Chromium (Debian's package)."""

from __future__ import annotations

import pytest

from .chromium import find_chromium

NEEDS_CHROMIUM = [pytest.mark.browser, pytest.mark.skipif(
    find_chromium() is None,
    reason="headless Chromium is not installed (/usr/bin/chromium): apt-get install -y "
           "--no-install-recommends chromium")]
"""Every browser test module's ``pytestmark``: skipped, saying why, without Chromium."""
