"""Server mode: :class:`LocalAWS`, moto's server on a loopback port in a thread.

Its one reason to change: serving moto over HTTP (werkzeug, the loopback bind, the WSGI
middleware that takes the DynamoDB and S3 locks around a request, the readiness wait,
reset). Several processes share one through :meth:`LocalAWS.env`.
"""

from __future__ import annotations

import functools
import io
import ipaddress
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, overload

from ._emulator_env import DEFAULT_REGION, _ClientFactory, _fake_env
from ._serialize import _DYNAMODB_LOCK, _SERVICE_TIME, _locks_for
from ._transactions import _patch_transactions, _unpatch_transactions

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient
    from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler

__all__ = ["LOCAL_EXTRA", "LocalAWS"]

# one logger for the whole emulator, whichever part of it logs
_LOG = logging.getLogger("jobguard.local.emulator")

_READY_TIMEOUT_S: Final = 15.0
_HTTP_TIMEOUT_S: Final = 5.0
_SHUTDOWN_POLL_S: Final = 0.05


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


class _SerializeRequests:
    """WSGI middleware: a lock around the complete handling of each DynamoDB / S3 request.

    The response body is materialised while the lock is held, so no part of a request
    (parsing, condition check, write, serialisation) overlaps with another request to
    the same service. Requests to other services pass straight through.

    Args:
        app: moto's WSGI application.
        dynamodb: Serialise DynamoDB requests (S3 requests always are).
    """

    def __init__(self, app: WSGIApplication, *, dynamodb: bool) -> None:
        self._app = app
        self._dynamodb = dynamodb

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        locks = _locks_for(environ, dynamodb=self._dynamodb)
        if not locks:
            return self._app(environ, start_response)
        # Read the whole request before taking a lock: a client stopped halfway through
        # sending (SIGSTOP in a chaos test) must not freeze every other client.
        length = int(environ.get("CONTENT_LENGTH") or 0)
        stream = environ["wsgi.input"]
        environ["wsgi.input"] = io.BytesIO(stream.read(length) if length else b"")
        with ExitStack() as held:
            for lock in locks:
                held.enter_context(lock)
            started = time.perf_counter()
            result = self._app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if callable(close):
                    close()
                if locks[0] is _DYNAMODB_LOCK:
                    _SERVICE_TIME[0] += time.perf_counter() - started
        return [body]


LOCAL_EXTRA: Final = "pip install 'jobguard[local]'"
"""What brings moto's server (Flask and the rest): ``jobguard[testing]`` has only the
in-process emulator (:func:`in_process`)."""


@contextmanager
def _moto_server() -> Iterator[None]:
    """Around an import of moto's server: a module it lacks is named in one line that
    says which extra brings it (instead of moto's own warning, which names moto[server])."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="When using MotoServer")
            yield
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            f"the server-based emulator (LocalAWS) needs moto's server, and {exc.name} is "
            f"not installed: {LOCAL_EXTRA} (jobguard[testing] has the in-process one only)",
            name=exc.name) from None


@functools.cache
def _quiet_request_handler() -> type[WSGIRequestHandler]:
    """moto's request handler, minus the per-request access log lines on stderr."""
    with _moto_server():
        from moto.moto_server.werkzeug_app import MotoRequestHandler

    class _QuietMotoRequestHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return

        def log(self, type: str, message: str, *args: Any) -> None:
            level = logging.WARNING if type == "error" else logging.DEBUG
            _LOG.log(level, message.rstrip(), *args)

    return _QuietMotoRequestHandler


class LocalAWS:
    """moto in server mode on a loopback port, with DynamoDB and S3 requests serialised.

    The server runs in a daemon thread of the current process (werkzeug, one thread
    per connection). Every DynamoDB request is handled under one lock, and every S3
    request under another, so conditional writes are atomic; other services (notably
    SQS long polls) are not affected by them. The locks are process-wide, like moto's
    state: two instances in one process share both their tables and their locks.
    While it runs, transactions back up only the items they name
    (:mod:`jobguard.local._transactions`).

    Args:
        host: Loopback address to bind. Anything that is not loopback is refused.
        port: TCP port; ``0`` picks a free one (read it back from :attr:`endpoint_url`).
        serialize_dynamodb: Keep ``True``. ``False`` exposes moto's racy DynamoDB
            conditional writes and exists only so a test can demonstrate the race
            (S3 requests stay serialised either way).
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
        self._patched_transactions = False

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
        with _moto_server():
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                create_backend_app,
            )
        from werkzeug.serving import make_server

        app: WSGIApplication = _SerializeRequests(
            DomainDispatcherApplication(create_backend_app), dynamodb=self._serialize_dynamodb
        )
        server = make_server(
            self._host, self._port, app, threaded=True, request_handler=_quiet_request_handler()
        )
        _patch_transactions()
        self._patched_transactions = True
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
        if self._patched_transactions:
            self._patched_transactions = False
            _unpatch_transactions()

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
