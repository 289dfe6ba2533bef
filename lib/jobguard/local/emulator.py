"""Embedded AWS emulator (moto) with atomic DynamoDB requests, for tests and offline runs.

moto's DynamoDB backend is not safe under concurrency: a conditional write checks its
condition and then writes in two separate steps, so several contending writers can all
"win" the same ``attribute_not_exists(pk)`` put. jobguard's correctness rests on
conditional writes being atomic, so everything here serialises DynamoDB requests behind
one lock, exactly as DynamoDB itself serialises writes to one item. S3 has the same
flaw (an ``If-None-Match: *`` put checks, then writes; an overwrite frees the old
object's buffer under a concurrent reader), so S3 requests are serialised behind a
second lock. Other services are left alone: in particular an SQS ``ReceiveMessage``
long poll never holds either lock, so it cannot stall DynamoDB or S3 traffic.

While any emulator runs, moto's ``TransactWriteItems`` also backs up only the items a
transaction names instead of deep-copying every table it touches (see
:mod:`jobguard.local._transactions`), so a transaction costs the same on a table of 100k items
as on an empty one.

Three entry points:

* :class:`LocalAWS` runs moto in server mode on a loopback port, in a daemon thread of
  the current process. Several processes (workers launched by a test) can share it
  through :meth:`LocalAWS.env`.
* :func:`in_process` is the cheap variant for single-process tests: ``moto.mock_aws()``
  plus the same DynamoDB serialisation, no sockets at all.
* ``python -m jobguard.local.emulator [--port N]`` runs :class:`LocalAWS` in the
  foreground, prints ``JOBGUARD_EMULATOR endpoint=http://127.0.0.1:PORT`` and serves
  until SIGTERM or SIGINT.

moto's state is global to a Python process: every :class:`LocalAWS` and
:func:`in_process` block in one process share (and reset) the same backends.

moto, boto3 and werkzeug are imported lazily, so importing this module is cheap.

This module is the emulator's front, its one reason to change: the names users import
and the command line. Each part has a module of its own: the server
(:mod:`jobguard.local._server`), the in-process mode (:mod:`jobguard.local._in_process`),
which requests are serialised (:mod:`jobguard.local._serialize`), DynamoDB's
transactions (:mod:`jobguard.local._transactions`) and partition budget
(:mod:`jobguard.local._dynamodb_budget`), and what points a client at the emulator
(:mod:`jobguard.local._emulator_env`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Final

from ._emulator_env import DEFAULT_REGION, FAKE_CREDENTIAL
from ._in_process import InProcessAWS, in_process
from ._server import LOCAL_EXTRA, LocalAWS, _moto_server

__all__ = [
    "DEFAULT_REGION",
    "ENDPOINT_LINE_PREFIX",
    "FAKE_CREDENTIAL",
    "InProcessAWS",
    "LOCAL_EXTRA",
    "LocalAWS",
    "in_process",
    "main",
]

ENDPOINT_LINE_PREFIX: Final = "JOBGUARD_EMULATOR"
"""First word of the line ``python -m jobguard.local.emulator`` prints once it serves."""


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """Run :class:`LocalAWS` in the foreground until SIGTERM or SIGINT.

    Prints exactly one line, ``JOBGUARD_EMULATOR endpoint=http://127.0.0.1:PORT``, on
    stdout (flushed) once the server answers.

    Args:
        argv: Command-line arguments (defaults to ``sys.argv[1:]``).

    Returns:
        Process exit status (0 after a clean shutdown).

    Example:
        .. code-block:: console

            $ python -m jobguard.local.emulator --port 0
            JOBGUARD_EMULATOR endpoint=http://127.0.0.1:40123
    """
    parser = argparse.ArgumentParser(
        prog="python -m jobguard.local.emulator",
        description="Serve an AWS emulator (moto, DynamoDB serialised) on loopback.",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--region", default=DEFAULT_REGION, help="region (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        with _moto_server():
            import moto.moto_server.werkzeug_app  # noqa: F401 - [testing] lacks it
    except ModuleNotFoundError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc}\n")

    stop_requested = threading.Event()

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    previous = {
        signum: signal.signal(signum, _request_stop) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        with LocalAWS(port=args.port, region=args.region) as aws:
            print(f"{ENDPOINT_LINE_PREFIX} endpoint={aws.endpoint_url}", flush=True)
            while not stop_requested.wait(timeout=1.0):
                pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
