"""AWS clients for the Lambda hot path, built from botocore directly.

``import boto3`` costs about 120 ms of cold start here (it pulls in s3transfer); a
botocore session gives the same clients, honours the same environment
(``AWS_ENDPOINT_URL``, region, credentials) and costs nothing extra.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

__all__ = ["client", "config", "reset"]

_lock = threading.Lock()


@lru_cache(maxsize=1)
def _session() -> Any:
    import botocore.session

    session = botocore.session.get_session()
    session.register_component("data_loader", shared_loader())
    return session


@lru_cache(maxsize=1)
def shared_loader() -> Any:
    """botocore's loader of service models, one per process. Every new session would
    otherwise parse each service's model and the endpoint rules again (about 60 ms a
    client here); sessions made after :func:`reset` (the emulator, a test) reuse it. The
    models on disk do not change while the process runs. Made as a session makes its
    own (``AWS_DATA_PATH`` honoured), without a second session: nothing on the cold
    start."""
    import os

    from botocore.loaders import create_loader

    return create_loader(os.environ.get("AWS_DATA_PATH"))


def config() -> Any:
    """The client configuration jobguard uses: standard retries, short timeouts, and no
    parameter validation: the library builds its requests itself, and botocore's walk
    over every attribute of a page of outcomes cost more CPU than the rest of the client
    (a test validates every request the library builds against the service model:
    ``tests/faults/test_valid_requests.py``)."""
    from botocore.config import Config

    return Config(
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=2,
        read_timeout=5,
        max_pool_connections=32,
        parameter_validation=False,
    )


def client(service: str) -> Any:
    """A botocore client built the way jobguard builds its own (public as
    ``jobguard.aws_client``): the same environment as boto3 (``AWS_ENDPOINT_URL``,
    region, credentials), standard retries and short timeouts (a lease operation that
    hangs is worse than one that fails fast and is resolved by a consistent read), and
    no ``import boto3`` on the cold start.

    Example:
        >>> from jobguard import aws_client
        >>> ddb = aws_client("dynamodb")  # doctest: +SKIP
    """
    with _lock:  # botocore sessions are not safe to create clients from concurrently
        return _session().create_client(service, config=config())


def reset() -> None:
    """Forget the cached botocore session: the next client is built from a new one.

    For the in-process emulator: a session made before moto was imported lacks moto's
    request hook, and its clients would go to the real endpoints."""
    with _lock:
        _session.cache_clear()
