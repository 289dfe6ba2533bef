"""Which requests the emulator serves one at a time: DynamoDB's and S3's.

Its one reason to change: which services' requests need moto to be atomic, and how a
request is told to be one of theirs (a WSGI environ in server mode, a botocore request in
process). moto checks a conditional write's condition and then writes, in two steps, so
contending writers could all win: every DynamoDB request is served under one lock and
every S3 request under another, process-wide like moto's state (see
:mod:`jobguard.local.emulator`). Other services (an SQS long poll) take neither.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment
    from botocore.awsrequest import AWSPreparedRequest

# moto's backends are process-wide, so the locks are too: every LocalAWS in this process
# and every in_process() block take this one lock around each DynamoDB request...
_DYNAMODB_LOCK: Final = threading.Lock()
# ... and this one around each S3 request. A reset takes both (DynamoDB first).
_S3_LOCK: Final = threading.Lock()

# The service in a SigV4 credential scope (Authorization header or presigned query):
# ``Credential=AKID/20260101/us-east-1/s3/aws4_request``.
_CREDENTIAL_SCOPE: Final = re.compile(r"Credential=[^/,\s&]+/\d{8}/[^/]+/([^/]+)/aws4_request")


# Seconds the emulator spent handling DynamoDB requests (under the lock), process-wide:
# lets a benchmark tell the emulator's own work from the client's.
_SERVICE_TIME = [0.0]


def _signed_service(authorization: str, query: str = "") -> str | None:
    """The service a request is signed for, or None (unsigned, or not SigV4)."""
    match = _CREDENTIAL_SCOPE.search(authorization) or _CREDENTIAL_SCOPE.search(unquote(query))
    return match.group(1) if match else None


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
