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
:func:`_patch_transactions`), so a transaction costs the same on a table of 100k items
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
"""

from __future__ import annotations

import argparse
import copy
import functools
import io
import ipaddress
import logging
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, overload
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient
    from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler

    from .throughput import PartitionBudget, PartitionThroughput

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

# moto's backends are process-wide, so the locks are too: every LocalAWS in this process
# and every in_process() block take this one lock around each DynamoDB request...
_DYNAMODB_LOCK: Final = threading.Lock()
# ... and this one around each S3 request. A reset takes both (DynamoDB first).
_S3_LOCK: Final = threading.Lock()

# The service in a SigV4 credential scope (Authorization header or presigned query):
# ``Credential=AKID/20260101/us-east-1/s3/aws4_request``.
_CREDENTIAL_SCOPE: Final = re.compile(r"Credential=[^/,\s&]+/\d{8}/[^/]+/([^/]+)/aws4_request")

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


def _signed_service(authorization: str, query: str = "") -> str | None:
    """The service a request is signed for, or None (unsigned, or not SigV4)."""
    match = _CREDENTIAL_SCOPE.search(authorization) or _CREDENTIAL_SCOPE.search(unquote(query))
    return match.group(1) if match else None


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
                from .._clients import shared_loader

                self._session = boto3.session.Session(
                    aws_access_key_id=FAKE_CREDENTIAL,
                    aws_secret_access_key=FAKE_CREDENTIAL,
                    aws_session_token=FAKE_CREDENTIAL,
                    region_name=self._region,
                )
                # the service models parsed once per process, not once per emulator
                self._session._session.register_component("data_loader", shared_loader())
            # The retry policy jobguard's own clients use in a Lambda (standard mode, 3
            # attempts): code under test meets the SDK's retries as deployed, and a
            # fault's backoff is the one `Faults(backoff_scale=...)` scales.
            return self._session.client(
                service,
                endpoint_url=self._endpoint_url,
                config=Config(max_pool_connections=_MAX_POOL_CONNECTIONS,
                              retries={"mode": "standard", "max_attempts": 3}),
            )


# --------------------------------------------------------------------------- server mode


def _locks_for(environ: WSGIEnvironment, *, dynamodb: bool) -> tuple[threading.Lock, ...]:
    """The locks a request must hold, in acquisition order (none for most services)."""
    if str(environ.get("PATH_INFO", "")).startswith("/moto-api/reset"):
        # A reset must not interleave with a conditional write either.
        return (_DYNAMODB_LOCK, _S3_LOCK) if dynamodb else (_S3_LOCK,)
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target.startswith("DynamoDB_"):
        return (_DYNAMODB_LOCK,) if dynamodb else ()
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    if _signed_service(authorization, str(environ.get("QUERY_STRING", ""))) == "s3":
        return (_S3_LOCK,)
    return ()


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


# Seconds the emulator spent handling DynamoDB requests (under the lock), process-wide:
# lets a benchmark tell the emulator's own work from the client's.
_SERVICE_TIME = [0.0]


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
    While it runs, transactions back up only the items they name (see module docs).

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


def _is_s3_request(request: AWSPreparedRequest) -> bool:
    authorization: Any = request.headers.get("Authorization", b"")
    if isinstance(authorization, bytes):
        authorization = authorization.decode("latin-1")
    return _signed_service(str(authorization), urlsplit(str(request.url)).query) == "s3"


def _patch_stubber() -> None:
    """Wrap ``BotocoreStubber.__call__`` so DynamoDB (and S3) requests run one at a time."""
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
                    budget = _BUDGET[0]
                    if budget is not None and budget.applies:
                        return _budgeted(budget, original, self, event_name, request, kwargs)
                    return original(self, event_name, request, **kwargs)
            if _is_s3_request(request):
                with _S3_LOCK:
                    return original(self, event_name, request, **kwargs)
            return original(self, event_name, request, **kwargs)

        BotocoreStubber.__call__ = serialized_call  # type: ignore[method-assign]


# The budget the in-process emulator enforces (in_process(throughput=...)), or None.
_BUDGET: list[PartitionBudget | None] = [None]


class _MotoTables:
    """The emulator's tables as :func:`jobguard.local._throttle.serve` reads them:
    straight from moto's backend, under the DynamoDB lock, without a request."""

    def __init__(self, region: str) -> None:
        self._region = region

    def _table(self, name: str) -> Any:
        from moto.dynamodb.models import dynamodb_backends

        for account in list(dynamodb_backends.keys()):
            backend = dynamodb_backends[account][self._region]
            if name in backend.tables:
                return backend.tables[name]
        raise KeyError(name)

    def key_attributes(self, table: str, index: str | None = None) -> tuple[str, str | None]:
        found = self._table(table)
        if index is None:
            return found.hash_key_attr, found.range_key_attr
        for candidate in [*found.global_indexes, *found.indexes]:
            if candidate.name == index:
                schema = {k["KeyType"]: k["AttributeName"] for k in candidate.schema}
                return schema["HASH"], schema.get("RANGE")
        raise KeyError(f"{table}/{index}")

    def read(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        from moto.dynamodb.models.dynamo_type import DynamoType

        found = self._table(table)
        hash_key = DynamoType(key[found.hash_key_attr])
        range_attr = found.range_key_attr
        range_key = DynamoType(key[range_attr]) if range_attr is not None else None
        item = found.get_item(hash_key, range_key)
        if item is None:
            return None
        attributes: dict[str, Any] = item.to_json()["Attributes"]
        return attributes


def _budgeted(budget: PartitionBudget, original: Any, stubber: Any, event_name: str,
              request: AWSPreparedRequest, kwargs: dict[str, Any]) -> AWSResponse | None:
    """One DynamoDB request served under the partition budget (the lock is held)."""
    import json

    from botocore.awsrequest import AWSPreparedRequest, AWSResponse
    from botocore.compat import HTTPHeaders
    from moto.core.botocore_stubber import MockRawResponse

    from ._throttle import serve

    target: Any = request.headers.get("X-Amz-Target", b"")
    if isinstance(target, bytes):
        target = target.decode("latin-1")
    operation = str(target).rsplit(".", 1)[-1]
    body: Any = request.body or b"{}"
    params = json.loads(body.decode() if isinstance(body, bytes) else body)
    marker: Any = request.headers.get("amz-sdk-request", b"")
    if isinstance(marker, bytes):
        marker = marker.decode("latin-1")
    found = re.search(r"attempt=(\d+)", str(marker))
    region = (urlsplit(str(request.url)).hostname or "").split(".")[1:2] or [DEFAULT_REGION]

    def send(served: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if served == params:
            forwarded = request
        else:  # fewer keys than asked (a batch): a request of its own, the caller's intact
            data = json.dumps(served).encode()
            headers = HTTPHeaders()
            for name, value in request.headers.items():
                if name.lower() != "content-length":
                    headers[name] = value
            headers["Content-Length"] = str(len(data))
            forwarded = AWSPreparedRequest(method=request.method, url=request.url,
                                           headers=headers, body=data, stream_output=False)
        answer = original(stubber, event_name, forwarded, **kwargs)
        content = answer.content
        return int(answer.status_code), dict(answer.headers.items()), (
            content if isinstance(content, bytes) else str(content).encode())

    status, headers, content = serve(budget, operation, params, tables=_MotoTables(region[0]),
                                     send=send, attempt=int(found.group(1)) if found else 1)
    answer_headers = HTTPHeaders()
    for name, value in headers.items():
        answer_headers[name] = value
    return AWSResponse(request.url, status, answer_headers, MockRawResponse(content))


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

    def __init__(self, *, region: str = DEFAULT_REGION,
                 throughput: PartitionBudget | None = None) -> None:
        self._region = region
        self._clients = _ClientFactory(region=region, endpoint_url=None)
        self.throughput = throughput
        """The partition budget DynamoDB requests are served under, or None (no limit):
        its counts say what it charged and refused."""

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
def in_process(*, region: str = DEFAULT_REGION,
               throughput: PartitionThroughput | PartitionBudget | None = None
               ) -> Iterator[InProcessAWS]:
    """``moto.mock_aws()`` with DynamoDB requests serialised, for single-process tests.

    For its duration: moto intercepts every boto3 call in this process; the fake
    credentials (``"testing"``) and ``AWS_DEFAULT_REGION`` / ``AWS_REGION`` are set in
    ``os.environ``, while ``AWS_ENDPOINT_URL*`` and ``AWS_PROFILE`` /
    ``AWS_DEFAULT_PROFILE`` are removed (they would route around the mock); moto's
    botocore hook holds a lock for every DynamoDB request (and another for every S3
    request), so conditional writes are atomic across threads; and transactions back up
    only the items they name. Everything is restored on exit, and moto drops its state.

    Args:
        region: Region for the environment and for :meth:`InProcessAWS.client`.
        throughput: Per-partition limits DynamoDB requests are served under
            (:mod:`jobguard.local.throughput`: units charged as DynamoDB bills them,
            requests past a partition key's budget refused in DynamoDB's shapes); a
            :class:`~jobguard.local.throughput.PartitionBudget` to keep its counts (or
            give it a clock). None (the default): no limit.

    Yields:
        An :class:`InProcessAWS` handle.

    Example:
        >>> with in_process() as aws:  # doctest: +SKIP
        ...     ddb = aws.client("dynamodb")
        ...     ddb.list_tables()["TableNames"]
        []
    """
    from moto import mock_aws

    from .. import _clients

    with mock_aws():
        # After mock_aws: it installs its own fake keys, which ours replace.
        saved = _override_environ(_fake_env(region), _STEERING_ENV_PREFIXES, _STEERING_ENV_NAMES)
        # jobguard's own clients come from a new session: one cached earlier (before
        # moto was imported, or under another endpoint) would route around the mock
        _clients.reset()
        budget = _budget_of(throughput)
        try:
            _patch_stubber()
            _patch_transactions()
            if budget is not None:
                if _BUDGET[0] is not None:
                    raise RuntimeError("an in_process(throughput=...) block is already "
                                       "running in this process: one budget at a time")
                _BUDGET[0] = budget
            try:
                yield InProcessAWS(region=region, throughput=budget)
            finally:
                if budget is not None:
                    _BUDGET[0] = None
                _unpatch_transactions()
                _unpatch_stubber()
        finally:
            _restore_environ(saved)
            _clients.reset()


def _budget_of(throughput: PartitionThroughput | PartitionBudget | None
               ) -> PartitionBudget | None:
    from .throughput import PartitionBudget, PartitionThroughput

    if throughput is None or isinstance(throughput, PartitionBudget):
        return throughput
    if isinstance(throughput, PartitionThroughput):
        return PartitionBudget(throughput)
    raise TypeError(f"in_process(throughput=...) takes a PartitionThroughput or a "
                    f"PartitionBudget, got {type(throughput).__name__}")


# --------------------------------------------------------------------------- transactions
#
# moto's DynamoDBBackend.transact_write_items starts with copy.deepcopy(table) of every
# table the transaction names, to roll back on failure: O(table size) per transaction,
# whatever the transaction's size. While an emulator runs, that method is wrapped so the
# backup covers only the items the transaction names (their keys are in the request):
#
#   1. before: copy each named item, or note that it is absent (moto's own keying:
#      hash/range attribute values from a Put's Item or from the Key of the others);
#   2. run moto's method unchanged, except that its deepcopy of a Table returns the
#      live table (its "rollback" then assigns each table to itself: a no-op);
#   3. on any exception: put the copies back, delete the items that were absent, trim
#      the stream records the transaction appended, and re-raise.
#
# So validation, conditions and CancellationReasons (with ALL_OLD items) stay moto's.
# Transactions run under the DynamoDB lock, so nothing interleaves with steps 1-3
# (with serialize_dynamodb=False nothing is atomic anyway). If moto's internals are
# not what this relies on, the patch is not applied, or a call falls back to moto's
# original method, which is slow but correct.

_transactions_depth = 0
_original_transact: Any = None
_original_models_copy: Any = None
_eliding_table_copy = threading.local()


class _ItemBackup(NamedTuple):
    """One item a transaction names, as it was before the transaction."""

    table_name: str
    hash_key: Any  # moto DynamoType
    range_key: Any  # moto DynamoType, or None for a table without a sort key
    item: Any  # deep copy of the moto Item, or None when it did not exist
    bucket_existed: bool  # tables with a sort key: whether items[hash_key] existed


class _StreamBackup(NamedTuple):
    """A touched table's stream shard and how many records it held before."""

    table_name: str
    shard: Any
    length: int


class _TableCopyElider:
    """Stands in for the ``copy`` module inside ``moto.dynamodb.models`` while patched.

    ``deepcopy`` of a Table returns the table itself, but only inside a patched
    transaction on this thread; everything else goes to the real ``copy`` module.
    """

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        if getattr(_eliding_table_copy, "active", False) and isinstance(value, self._table_type):
            return value
        return copy.deepcopy(value, memo)


def _snapshot_touched_items(
    backend: Any, transact_items: Sequence[Mapping[str, Any]], dynamo_type: type
) -> tuple[list[_ItemBackup], list[_StreamBackup]] | None:
    """Copies of the items a transaction names, or None if their keys cannot be told.

    Tables that do not exist are skipped: moto cancels any operation on them.
    """
    items: dict[tuple[str, Any, Any], _ItemBackup] = {}
    streams: dict[str, _StreamBackup] = {}
    try:
        for entry in transact_items:
            for op_type, op in entry.items():  # moto refuses entries with two ops
                try:
                    table = backend.get_table(op["TableName"])
                except Exception:  # moto's ResourceNotFound: nothing to back up
                    continue
                source = op["Item"] if op_type == "Put" else op["Key"]
                hash_key = dynamo_type(source[table.hash_key_attr])
                range_attr = table.range_key_attr
                range_key = dynamo_type(source[range_attr]) if range_attr is not None else None
                bucket = table.items.get(hash_key)
                current = bucket if range_key is None or bucket is None else bucket.get(range_key)
                key = (table.name, hash_key, range_key)
                if key not in items:
                    items[key] = _ItemBackup(
                        table.name, hash_key, range_key, copy.deepcopy(current), bucket is not None
                    )
                shard = table.stream_shard
                if shard is not None and table.name not in streams:
                    streams[table.name] = _StreamBackup(table.name, shard, len(shard.items))
    except Exception:  # a malformed request, or moto's internals changed
        _LOG.debug("transaction keys unclear: using moto's full-table backup", exc_info=True)
        return None
    return list(items.values()), list(streams.values())


def _restore_touched_items(
    backend: Any, items: Sequence[_ItemBackup], streams: Sequence[_StreamBackup]
) -> None:
    """Undo whatever a failed transaction did to the items it named."""
    for backup in items:
        table = backend.tables.get(backup.table_name)
        if table is None:
            continue
        if backup.range_key is None:
            if backup.item is None:
                table.items.pop(backup.hash_key, None)
            else:
                table.items[backup.hash_key] = backup.item
            continue
        bucket = table.items.get(backup.hash_key)
        if backup.item is not None:
            table.items.setdefault(backup.hash_key, {})[backup.range_key] = backup.item
        elif bucket is not None:
            bucket.pop(backup.range_key, None)
            if not bucket and not backup.bucket_existed:
                del table.items[backup.hash_key]
    for stream in streams:
        table = backend.tables.get(stream.table_name)
        if table is not None and table.stream_shard is stream.shard:
            del stream.shard.items[stream.length :]


def _with_item_level_rollback(original: Any, dynamo_type: type) -> Any:
    """moto's ``transact_write_items``, backing up only the items it names."""

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        snapshot = _snapshot_touched_items(self, transact_items, dynamo_type)
        if snapshot is None:
            original(self, transact_items)
            return
        _eliding_table_copy.active = True
        try:
            original(self, transact_items)
        except BaseException:
            _restore_touched_items(self, *snapshot)
            raise
        finally:
            _eliding_table_copy.active = False

    return transact_write_items


def _patch_transactions() -> None:
    """Make moto's transactions back up only the items they name (reference-counted)."""
    global _transactions_depth, _original_transact, _original_models_copy
    with _PATCH_GUARD:
        _transactions_depth += 1
        if _transactions_depth > 1:
            return
        try:
            from moto.dynamodb import models
            from moto.dynamodb.models.dynamo_type import DynamoType
            from moto.dynamodb.models.table import Table

            backend = models.DynamoDBBackend
            original = backend.transact_write_items
        except (ImportError, AttributeError):
            _LOG.warning("moto internals changed: transactions keep their full-table backup")
            return
        module_globals = vars(models)  # where moto's method looks up ``copy``
        if module_globals.get("copy") is not copy:
            _LOG.warning("moto internals changed: transactions keep their full-table backup")
            return
        _original_transact = original
        _original_models_copy = module_globals["copy"]
        module_globals["copy"] = _TableCopyElider(Table)
        backend.transact_write_items = (  # type: ignore[method-assign]
            _with_item_level_rollback(original, DynamoType)
        )


def _unpatch_transactions() -> None:
    global _transactions_depth, _original_transact, _original_models_copy
    with _PATCH_GUARD:
        _transactions_depth -= 1
        if _transactions_depth > 0 or _original_transact is None:
            return
        from moto.dynamodb import models

        models.DynamoDBBackend.transact_write_items = (  # type: ignore[method-assign]
            _original_transact
        )
        vars(models)["copy"] = _original_models_copy
        _original_transact = None
        _original_models_copy = None


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
