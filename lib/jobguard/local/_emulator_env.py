"""How a boto3 client, or a whole process's environment, is pointed at the emulator.

Its one reason to change: what a client of the emulator is given (the fake credentials,
the region, the SDK's retry and pool settings, the environment variables that would
steer boto3 elsewhere). Both modes use it: :mod:`jobguard.local._server` (``LocalAWS``)
and :mod:`jobguard.local._in_process` (``in_process``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["DEFAULT_REGION", "FAKE_CREDENTIAL"]

DEFAULT_REGION: Final = "us-east-1"
"""Region used when none is given."""

FAKE_CREDENTIAL: Final = "testing"
"""Access key, secret key and session token handed to clients of the emulator."""


_MAX_POOL_CONNECTIONS: Final = 64

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
