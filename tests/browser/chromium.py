"""Headless Chromium driven over the DevTools protocol on a pipe (standard library only).

Chromium (Debian's ``chromium`` package) is started with ``--remote-debugging-pipe``:
it reads commands from file descriptor 3 and writes answers and events to 4, each a
JSON message ended by a NUL byte. Enough of the protocol to open a page, evaluate an
expression in it (the DOM as laid out: ``getBoundingClientRect``) and take a screenshot.

As a script it writes a PNG of a page (``make screenshot``)::

    python -m tests.browser.chromium PAGE.html OUT.png [--width 1280]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM", "Browser", "BrowserError", "find_chromium"]

CHROMIUM = "/usr/bin/chromium"


class BrowserError(RuntimeError):
    """Chromium did not start, answered with an error, or took too long."""


def find_chromium() -> str | None:
    """Debian's Chromium (``CHROMIUM`` env var, ``/usr/bin/chromium``, or on PATH)."""
    for candidate in (os.environ.get("CHROMIUM"), CHROMIUM, shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class Browser:
    """One headless Chromium with one page, closed on exit.

    Example:
        >>> with Browser() as browser:  # doctest: +SKIP
        ...     browser.open(Path("page.html"), width=1280)
        ...     title = browser.evaluate("document.title")
        ...     png = browser.screenshot()
    """

    def __init__(self, executable: str | None = None, *, timeout_s: float = 60) -> None:
        found = executable or find_chromium()
        if found is None:
            raise BrowserError("no Chromium: install Debian's chromium package")
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="jobguard-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        args = [found, "--headless", "--remote-debugging-pipe", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--mute-audio",
                "--hide-scrollbars", "--font-render-hinting=none",
                "--disable-dev-shm-usage",  # a container's small /dev/shm crashes renderers
                f"--user-data-dir={self._profile}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # root (CI, containers): no user namespace

        def child_fds() -> None:
            # fds 3 and 4 in the child; via high numbers first, in case a pipe's own
            # number is 3 or 4. dup2's copies are inheritable; every other descriptor
            # Python opened is close-on-exec, so nothing else reaches Chromium.
            high_r, high_w = os.dup2(to_child_r, 200), os.dup2(from_child_w, 201)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
            os.close(high_r)
            os.close(high_w)

        self._process = subprocess.Popen(  # noqa: S603 - a fixed argument list
            args, close_fds=False, preexec_fn=child_fds,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_child_r)
        os.close(from_child_w)
        os.set_blocking(self._from_child, False)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._session: str | None = None

    # -- the protocol ------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_child], [], [], min(left, 1.0))
            if not ready:
                if self._process.poll() is not None:
                    said = (self._process.stderr.read() if self._process.stderr else b"")
                    raise BrowserError(f"Chromium exited ({self._process.returncode}): "
                                       f"{said.decode(errors='replace')[-800:]}")
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium closed its pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        data: dict[str, Any] = json.loads(message)
        return data

    def send(self, method: str, params: dict[str, Any] | None = None, *,
             session: bool = True) -> dict[str, Any]:
        """One command; its result (an error answer raises :class:`BrowserError`)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method,
                                   "params": params or {}}
        if session and self._session:
            message["sessionId"] = self._session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self._events.append(answer)

    def wait_event(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            for index, event in enumerate(self._events):
                if event.get("method") == method:
                    return self._events.pop(index)
            self._events.append(self._read_message(deadline))

    # -- what a test does ----------------------------------------------------------------

    def open(self, page: Path, *, width: int = 1280, height: int = 800) -> None:
        """Load a page from a file in a ``width`` x ``height`` viewport, until its load
        event (a local file: nothing else to wait for)."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self.send("Target.attachToTarget", {"targetId": target["targetId"],
                                                       "flatten": True}, session=False)
        self._session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": page.resolve().as_uri()})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The expression's value in the page (JSON-serializable values)."""
        answer = self.send("Runtime.evaluate", {"expression": expression,
                                                "returnByValue": True})
        if "exceptionDetails" in answer:
            raise BrowserError(f"evaluate: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, *, full_page: bool = True, element: str | None = None) -> bytes:
        """A PNG of the viewport, of the whole page, or of one element (a CSS selector)."""
        params: dict[str, Any] = {"format": "png"}
        if element is not None:
            box = self.evaluate(
                f"(() => {{ const e = document.querySelector({json.dumps(element)}); if (!e) "
                "return null; const r = e.getBoundingClientRect(); return {x: r.x + "
                "window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height}; "
                "})()")
            if box is None:
                raise BrowserError(f"no element {element!r} in the page")
            params.update(captureBeyondViewport=True, clip={**box, "scale": 1})
        elif full_page:
            metrics = self.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": size["width"], "height": size["height"],
                "scale": 1})
        return base64.b64decode(self.send("Page.captureScreenshot", params)["data"])

    def close(self) -> None:
        try:
            if self._process.poll() is None:
                self.send("Browser.close", session=False)
        except (BrowserError, OSError):
            pass
        finally:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            for fd in (self._to_child, self._from_child):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if self._process.stderr:
                self._process.stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.browser.chromium",
                                     description="a PNG of a page, from headless Chromium")
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--viewport-only", action="store_true",
                        help="the first screen only (default: the whole page)")
    parser.add_argument("--element", metavar="CSS",
                        help="only this element (e.g. '#d2', a drill's section)")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        raise SystemExit(f"error: {args.page}: no such page")
    try:
        with Browser() as browser:
            browser.open(args.page, width=args.width, height=args.height)
            args.png.write_bytes(browser.screenshot(full_page=not args.viewport_only,
                                                    element=args.element))
    except BrowserError as exc:
        raise SystemExit(f"error: {exc}") from None
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
