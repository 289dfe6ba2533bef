"""Embedded AWS emulator (moto) with atomic DynamoDB requests, for tests and offline runs.

moto's DynamoDB backend is not safe under concurrency: a conditional write checks its
condition and then writes in two separate steps, so several contending writers can all
"win" the same ``attribute_not_exists(pk)`` put. jobguard's correctness rests on
conditional writes being atomic, so everything here serialises DynamoDB requests behind
one lock, exactly as DynamoDB itself serialises writes to one item. Other services are
left alone: in particular an SQS ``ReceiveMessage`` long poll never holds that lock, so
it cannot stall DynamoDB traffic while it waits.

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
"""

from __future__ import annotations

import argparse
import functools
import ipaddress
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, overload
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient
    from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler

__all__ = [
    "DEFAULT_REGION",
    "ENDPOINT_LINE_PREFIX",
    "FAKE_CREDENTIAL",
    "InProcessAWS",
    "LocalAWS",
    "in_process",
    "main",
]

DEFAULT_REGION: Final = "us-east-1"
"""Region used when none is given."""

FAKE_CREDENTIAL: Final = "testing"
"""Access key, secret key and session token handed to clients of the emulator."""

ENDPOINT_LINE_PREFIX: Final = "JOBGUARD_EMULATOR"
"""First word of the line ``python -m jobguard.local.emulator`` prints once it serves."""

_LOG = logging.getLogger(__name__)

_READY_TIMEOUT_S: Final = 15.0
_HTTP_TIMEOUT_S: Final = 5.0
_SHUTDOWN_POLL_S: Final = 0.05
_MAX_POOL_CONNECTIONS: Final = 64

# moto's backends are process-wide, so the lock is too: every LocalAWS in this process
# and every in_process() block take this one lock around each DynamoDB request.
_DYNAMODB_LOCK: Final = threading.Lock()

# Environment variables that would steer boto3 away from the emulator or make client
# creation fail (a profile that does not exist on this machine).
_STEERING_ENV_PREFIXES: Final = ("AWS_ENDPOINT_URL",)
_STEERING_ENV_NAMES: Final = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE")


def _fake_env(region: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": FAKE_CREDENTIAL,
        "AWS_SECRET_ACCESS_KEY": FAKE_CREDENTIAL,
        "AWS_SESSION_TOKEN": FAKE_CREDENTIAL,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
    }


def _require_loopback(host: str) -> None:
    """Reject any bind address that is not a loopback address."""
    if host == "localhost":
        return
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"host must be a loopback IP address or 'localhost', got {host!r}"
        ) from None
    if not address.is_loopback:
        raise ValueError(f"refusing to bind {host!r}: the emulator only listens on loopback")


def _http(method: str, url: str, *, timeout: float = _HTTP_TIMEOUT_S) -> bytes:
    """One HTTP request to the emulator, bypassing any proxy configured in the environment."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    data = b"" if method == "POST" else None
    request = urllib.request.Request(url, data=data, method=method)
    with opener.open(request, timeout=timeout) as response:
        body: bytes = response.read()
        return body


# --------------------------------------------------------------------------- clients


class _ClientFactory:
    """Builds boto3 clients from one private session (sessions are not thread-safe)."""

    def __init__(self, *, region: str, endpoint_url: str | None) -> None:
        self._region = region
        self._endpoint_url = endpoint_url
        self._lock = threading.Lock()
        self._session: Any = None

    def make(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        with self._lock:
            if self._session is None:
                self._session = boto3.session.Session(
                    aws_access_key_id=FAKE_CREDENTIAL,
                    aws_secret_access_key=FAKE_CREDENTIAL,
                    aws_session_token=FAKE_CREDENTIAL,
                    region_name=self._region,
                )
            return self._session.client(
                service,
                endpoint_url=self._endpoint_url,
                config=Config(max_pool_connections=_MAX_POOL_CONNECTIONS),
            )


# --------------------------------------------------------------------------- server mode


def _holds_dynamodb_lock(environ: WSGIEnvironment) -> bool:
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target.startswith("DynamoDB_"):
        return True
    # A reset must not interleave with a conditional write either.
    return str(environ.get("PATH_INFO", "")).startswith("/moto-api/reset")


class _SerializeDynamoDB:
    """WSGI middleware: one lock around the complete handling of every DynamoDB request.

    The response body is materialised while the lock is held, so no part of a DynamoDB
    request (parsing, condition check, write, serialisation) overlaps with another.
    Requests to other services pass straight through.
    """

    def __init__(self, app: WSGIApplication, lock: threading.Lock) -> None:
        self._app = app
        self._lock = lock

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not _holds_dynamodb_lock(environ):
            return self._app(environ, start_response)
        with self._lock:
            started = time.perf_counter()
            result = self._app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if callable(close):
                    close()
                _SERVICE_TIME[0] += time.perf_counter() - started
        return [body]


# Seconds the emulator spent handling DynamoDB requests (under the lock), process-wide:
# lets a benchmark tell the emulator's own work from the client's.
_SERVICE_TIME = [0.0]


@functools.cache
def _quiet_request_handler() -> type[WSGIRequestHandler]:
    """moto's request handler, minus the per-request access log lines on stderr."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class _QuietMotoRequestHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return

        def log(self, type: str, message: str, *args: Any) -> None:
            level = logging.WARNING if type == "error" else logging.DEBUG
            _LOG.log(level, message.rstrip(), *args)

    return _QuietMotoRequestHandler


class LocalAWS:
    """moto in server mode on a loopback port, with DynamoDB requests serialised.

    The server runs in a daemon thread of the current process (werkzeug, one thread
    per connection). Every DynamoDB request is handled under one lock, so conditional
    writes are atomic; other services (notably SQS long polls) are not affected by it.
    The lock is process-wide, like moto's state: two instances in one process share
    both their tables and their lock.

    Args:
        host: Loopback address to bind. Anything that is not loopback is refused.
        port: TCP port; ``0`` picks a free one (read it back from :attr:`endpoint_url`).
        serialize_dynamodb: Keep ``True``. ``False`` exposes moto's racy conditional
            writes and exists only so a test can demonstrate the race.
        region: Region for :meth:`client` and :meth:`env`.

    Example:
        >>> with LocalAWS() as aws:  # doctest: +SKIP
        ...     ddb = aws.client("dynamodb")
        ...     ddb.list_tables()["TableNames"]
        []
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        serialize_dynamodb: bool = True,
        region: str = DEFAULT_REGION,
    ) -> None:
        _require_loopback(host)
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {port}")
        self._host = host
        self._port = port
        self._serialize_dynamodb = serialize_dynamodb
        self._region = region
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._endpoint_url: str | None = None
        self._clients: _ClientFactory | None = None

    @property
    def dynamodb_service_s(self) -> float:
        """Total seconds the emulator has spent handling DynamoDB requests so far."""
        return _SERVICE_TIME[0]

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> LocalAWS:
        """Bind, start serving in a daemon thread and wait until the server answers.

        Returns:
            ``self``, so ``aws = LocalAWS().start()`` works.

        Raises:
            RuntimeError: Already started, or the server did not answer in time.
            OSError: The port could not be bound.

        Example:
            >>> aws = LocalAWS().start()  # doctest: +SKIP
            >>> aws.endpoint_url  # doctest: +SKIP
            'http://127.0.0.1:40123'
            >>> aws.stop()  # doctest: +SKIP
        """
        if self._server is not None:
            raise RuntimeError("LocalAWS is already started")
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        app: WSGIApplication = DomainDispatcherApplication(create_backend_app)
        if self._serialize_dynamodb:
            app = _SerializeDynamoDB(app, _DYNAMODB_LOCK)
        server = make_server(
            self._host, self._port, app, threaded=True, request_handler=_quiet_request_handler()
        )
        port = int(server.socket.getsockname()[1])
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._server = server
        self._endpoint_url = f"http://{host}:{port}"
        self._clients = _ClientFactory(region=self._region, endpoint_url=self._endpoint_url)
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": _SHUTDOWN_POLL_S},
            name=f"jobguard-emulator-{port}",
            daemon=True,
        )
        self._thread.start()
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        _LOG.debug("emulator serving at %s", self._endpoint_url)
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        url = f"{self.endpoint_url}/moto-api/config"
        while True:
            try:
                _http("GET", url)
                return
            except (urllib.error.URLError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"emulator at {self.endpoint_url} did not answer") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop serving and close the listening socket. Safe to call twice.

        werkzeug closes every connection after one response, so nothing lingers except
        requests still in flight (e.g. an SQS long poll), which finish on their daemon
        threads. moto's state is process-wide and survives ``stop()``; call
        :meth:`reset` for a clean slate.

        Example:
            >>> aws = LocalAWS().start()  # doctest: +SKIP
            >>> aws.stop()  # doctest: +SKIP
        """
        server, thread = self._server, self._thread
        self._server = None
        self._thread = None
        self._endpoint_url = None
        self._clients = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=_HTTP_TIMEOUT_S)

    def __enter__(self) -> LocalAWS:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---------------------------------------------------------------- accessors

    @property
    def running(self) -> bool:
        """Whether the server has been started and not stopped."""
        return self._server is not None

    @property
    def region(self) -> str:
        """Region used by :meth:`client` and :meth:`env`."""
        return self._region

    @property
    def endpoint_url(self) -> str:
        """``http://HOST:PORT`` of the running server.

        Raises:
            RuntimeError: The emulator is not running.

        Example:
            >>> with LocalAWS() as aws:  # doctest: +SKIP
            ...     print(aws.endpoint_url)
            http://127.0.0.1:40123
        """
        if self._endpoint_url is None:
            raise RuntimeError("LocalAWS is not running; call start() first")
        return self._endpoint_url

    def reset(self) -> None:
        """Drop all emulated state (moto's ``POST /moto-api/reset``).

        The reset is serialised with DynamoDB requests. moto's state is process-wide,
        so this also clears what an :func:`in_process` block in this process holds.

        Example:
            >>> with LocalAWS() as aws:  # doctest: +SKIP
            ...     aws.client("sqs").create_queue(QueueName="q")
            ...     aws.reset()
            ...     aws.client("sqs").list_queues().get("QueueUrls", [])
            []
        """
        _http("POST", f"{self.endpoint_url}/moto-api/reset")

    def env(self) -> dict[str, str]:
        """Environment variables that point boto3 (in any process) at this emulator.

        Returns:
            ``AWS_ENDPOINT_URL``, fake ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``
            / ``AWS_SESSION_TOKEN`` (all ``"testing"``), ``AWS_DEFAULT_REGION`` and
            ``AWS_REGION``.

        Example:
            >>> with LocalAWS() as aws:  # doctest: +SKIP
            ...     subprocess.run([sys.executable, "worker.py"], env={**os.environ, **aws.env()})
        """
        return {"AWS_ENDPOINT_URL": self.endpoint_url, **_fake_env(self._region)}

    @overload
    def client(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    @overload
    def client(self, service: str) -> Any: ...

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` pointed at this emulator (thread-safe to share).

        Args:
            service: boto3 service name, e.g. ``"dynamodb"`` or ``"sqs"``.

        Example:
            >>> with LocalAWS() as aws:  # doctest: +SKIP
            ...     aws.client("sqs").create_queue(QueueName="jobs")
        """
        if self._clients is None:
            raise RuntimeError("LocalAWS is not running; call start() first")
        return self._clients.make(service)

    def __repr__(self) -> str:
        where = self._endpoint_url or "stopped"
        return f"LocalAWS({where}, serialize_dynamodb={self._serialize_dynamodb})"


# --------------------------------------------------------------------------- in-process mode

_PATCH_GUARD = threading.Lock()
_patch_depth = 0
_original_stubber_call: Any = None


def _is_dynamodb_request(request: AWSPreparedRequest) -> bool:
    hostname = urlsplit(str(request.url)).hostname or ""
    if hostname.split(".", 1)[0] in ("dynamodb", "dynamodb-fips"):
        return True
    target: Any = request.headers.get("X-Amz-Target", b"")
    if isinstance(target, bytes):
        target = target.decode("latin-1")
    return str(target).startswith("DynamoDB_")


def _patch_stubber() -> None:
    """Wrap ``BotocoreStubber.__call__`` so DynamoDB requests run one at a time."""
    global _patch_depth, _original_stubber_call
    from moto.core.botocore_stubber import BotocoreStubber

    with _PATCH_GUARD:
        _patch_depth += 1
        if _patch_depth > 1:
            return
        original = BotocoreStubber.__call__
        _original_stubber_call = original

        @functools.wraps(original)
        def serialized_call(
            self: BotocoreStubber, event_name: str, request: AWSPreparedRequest, **kwargs: Any
        ) -> AWSResponse | None:
            if _is_dynamodb_request(request):
                with _DYNAMODB_LOCK:
                    return original(self, event_name, request, **kwargs)
            return original(self, event_name, request, **kwargs)

        BotocoreStubber.__call__ = serialized_call  # type: ignore[method-assign]


def _unpatch_stubber() -> None:
    global _patch_depth, _original_stubber_call
    from moto.core.botocore_stubber import BotocoreStubber

    with _PATCH_GUARD:
        _patch_depth -= 1
        if _patch_depth > 0:
            return
        BotocoreStubber.__call__ = _original_stubber_call  # type: ignore[method-assign]
        _original_stubber_call = None


def _override_environ(
    set_vars: Mapping[str, str], unset_prefixes: Sequence[str], unset_names: Sequence[str]
) -> dict[str, str | None]:
    saved: dict[str, str | None] = {}
    doomed = [k for k in os.environ if k.startswith(tuple(unset_prefixes))] + list(unset_names)
    for key in doomed:
        saved.setdefault(key, os.environ.get(key))
        os.environ.pop(key, None)
    for key, value in set_vars.items():
        saved.setdefault(key, os.environ.get(key))
        os.environ[key] = value
    return saved


def _restore_environ(saved: Mapping[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class InProcessAWS:
    """Handle yielded by :func:`in_process`: makes boto3 clients served by ``mock_aws``.

    Example:
        >>> with in_process() as aws:  # doctest: +SKIP
        ...     aws.client("dynamodb").list_tables()["TableNames"]
        []
    """

    def __init__(self, *, region: str = DEFAULT_REGION) -> None:
        self._region = region
        self._clients = _ClientFactory(region=region, endpoint_url=None)

    @property
    def region(self) -> str:
        """Region of the clients (and of the environment set by :func:`in_process`)."""
        return self._region

    @overload
    def client(self, service: Literal["dynamodb"]) -> DynamoDBClient: ...
    @overload
    def client(self, service: Literal["sqs"]) -> SQSClient: ...
    @overload
    def client(self, service: str) -> Any: ...

    def client(self, service: str) -> Any:
        """A boto3 client for ``service``, intercepted by moto (thread-safe to share).

        Args:
            service: boto3 service name, e.g. ``"dynamodb"`` or ``"sqs"``.

        Example:
            >>> with in_process() as aws:  # doctest: +SKIP
            ...     aws.client("sqs").create_queue(QueueName="jobs")
        """
        return self._clients.make(service)

    def __repr__(self) -> str:
        return f"InProcessAWS(region={self._region!r})"


@contextmanager
def in_process(*, region: str = DEFAULT_REGION) -> Iterator[InProcessAWS]:
    """``moto.mock_aws()`` with DynamoDB requests serialised, for single-process tests.

    For its duration: moto intercepts every boto3 call in this process; the fake
    credentials (``"testing"``) and ``AWS_DEFAULT_REGION`` / ``AWS_REGION`` are set in
    ``os.environ``, while ``AWS_ENDPOINT_URL*`` and ``AWS_PROFILE`` /
    ``AWS_DEFAULT_PROFILE`` are removed (they would route around the mock); and
    moto's botocore hook holds a lock for every DynamoDB request, so conditional writes
    are atomic across threads. Everything is restored on exit, and moto drops its state.

    Args:
        region: Region for the environment and for :meth:`InProcessAWS.client`.

    Yields:
        An :class:`InProcessAWS` handle.

    Example:
        >>> with in_process() as aws:  # doctest: +SKIP
        ...     ddb = aws.client("dynamodb")
        ...     ddb.list_tables()["TableNames"]
        []
    """
    from moto import mock_aws

    with mock_aws():
        # After mock_aws: it installs its own fake keys, which ours replace.
        saved = _override_environ(_fake_env(region), _STEERING_ENV_PREFIXES, _STEERING_ENV_NAMES)
        try:
            _patch_stubber()
            try:
                yield InProcessAWS(region=region)
            finally:
                _unpatch_stubber()
        finally:
            _restore_environ(saved)


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
