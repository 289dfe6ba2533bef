"""Nothing leaves the machine: what the pytest plugin does before any test module loads.

A client made when a handler's module is imported (``boto3.client("dynamodb")`` at
module level, as users write) exists before any sandbox starts. botocore copies its
event handlers when a client is made, so moto answers that client only if moto's hook
was registered first, and it signs with whatever credentials the environment held then.
:func:`seal` therefore, once per session and before collection:

1. replaces the environment's AWS credentials, profiles, endpoint variables and config
   files with fake ones (the user's region is kept), so no client can sign with the
   user's own keys, and the instance metadata service is not asked;
2. imports moto's interception, so every client made from now on is answered by a
   sandbox while one runs (``moto`` registers its hook when imported);
3. registers a last ``before-send`` hook that refuses any request to a host that is
   neither loopback (the local emulators) nor answered by a running sandbox:
   :class:`RequestLeftTheMachine` instead of a request to AWS.

Not for Lambda code: only :mod:`jobguard.pytest_plugin` calls it.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from .errors import JobGuardError

__all__ = ["RequestLeftTheMachine", "seal", "session_region"]

FAKE: Final = "testing"
_DEFAULT_REGION: Final = "us-east-1"
_SCRUBBED_PREFIXES: Final = ("AWS_ENDPOINT_URL",)
_SCRUBBED: Final = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CREDENTIAL_EXPIRATION",
)
_sealed_region: str | None = None


class RequestLeftTheMachine(JobGuardError):
    """A request in a test session went to a host that is not local (nothing answered it
    here, so it was refused before it was sent). Attributes: ``url``."""

    def __init__(self, url: str) -> None:
        super().__init__(
            f"jobguard's testing kit refused a request to {url}: in a test session no "
            f"request leaves the machine. Make the call inside a test that uses the "
            f"jobguard_sandbox fixture (or `with Sandbox.start():`), or run pytest with "
            f"-p no:jobguard for tests meant to reach AWS")
        self.url = url


def session_region() -> str:
    """The region the session was sealed with (the user's, or us-east-1)."""
    return _sealed_region or os.environ.get("AWS_DEFAULT_REGION") or _DEFAULT_REGION


def seal() -> None:
    """Scrub the environment and install the hooks (idempotent; see the module doc)."""
    global _sealed_region
    if _sealed_region is not None:
        return
    region = (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
              or _DEFAULT_REGION)
    for name in [k for k in os.environ if k.startswith(_SCRUBBED_PREFIXES)] + list(_SCRUBBED):
        os.environ.pop(name, None)
    nowhere = str(Path(tempfile.gettempdir()) / "jobguard-no-aws-config" / "absent")
    os.environ.update(
        AWS_ACCESS_KEY_ID=FAKE, AWS_SECRET_ACCESS_KEY=FAKE, AWS_DEFAULT_REGION=region,
        AWS_REGION=region, AWS_CONFIG_FILE=nowhere, AWS_SHARED_CREDENTIALS_FILE=nowhere,
        AWS_EC2_METADATA_DISABLED="true")
    import moto.core.models  # noqa: F401 - registers moto's before-send hook first
    from botocore.handlers import BUILTIN_HANDLERS

    BUILTIN_HANDLERS.append(("before-send", _keep_local))
    _sealed_region = region


def _keep_local(request: Any, **kwargs: Any) -> None:
    """A ``before-send`` hook after moto's: let through what a sandbox or a loopback host
    answers, refuse the rest."""
    host = urlsplit(str(request.url)).hostname or ""
    if _is_loopback(host) or _sandbox_answers(str(request.url), host):
        return
    raise RequestLeftTheMachine(str(request.url).split("?", 1)[0])


def _is_loopback(host: str) -> bool:
    """A loopback host, or one that cannot exist (``.invalid``, RFC 2606: the fault
    harness's answered requests are renamed there)."""
    if host in ("localhost", "invalid") or host.endswith((".localhost", ".invalid")):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _sandbox_answers(url: str, host: str) -> bool:
    """moto, while a mock runs, answers every request to an AWS host (with a 404 for
    what it does not implement), except the URLs configured to pass through."""
    models = sys.modules.get("moto.core.models")
    if models is None or not models.botocore_stubber.enabled:
        return False
    if not host.endswith((".amazonaws.com", ".amazonaws.com.cn")):
        return False
    from moto.core.config import passthrough_url

    return not passthrough_url(url.split("?", 1)[0])
