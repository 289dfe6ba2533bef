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

    loader, files = _service_loader_class()
    paths = os.environ.get("AWS_DATA_PATH")
    if paths is None:  # as botocore.loaders.create_loader reads it
        return loader(file_loader=files())
    return loader(file_loader=files(),
                  extra_search_paths=[os.path.expanduser(os.path.expandvars(path))
                                      for path in paths.split(os.pathsep)])


@lru_cache(maxsize=1)
def _service_loader_class() -> tuple[type, type]:
    """botocore's loader and its JSON file loader, with two costs of the cold start
    taken off (the same files loaded into the same data; ``tests/unit/test_cold_path.py``
    compares both with botocore's):

    - loading one service's model looks in that service's directory only. botocore
      first lists every service on the search path (about 400 directories and 800 files
      stat'ed, once for the model and again for the endpoint rules: about 15 ms here) to
      check the one asked for is among them; a service that is not there goes to
      botocore's own method, whose error lists the known services;
    - a file is parsed into plain dicts, not ``OrderedDict`` through a Python hook
      called for every JSON object (half the time of the 1.5 MB a DynamoDB client reads:
      the 1 MB endpoints file, the model, the endpoint rules; about 15 ms here). Both
      keep the file's order; nothing in botocore uses what only ``OrderedDict`` has.
    """
    import json
    import os

    from botocore import loaders
    from botocore.exceptions import DataNotFoundError

    if not _known_layout(loaders):  # another botocore: its own loader, as it is
        return loaders.Loader, loaders.JSONFileLoader
    instance_cache, logger = loaders.instance_cache, loaders.logger

    class PlainJSONFileLoader(loaders.JSONFileLoader):
        def _load_file(self, full_path: str, open_method: Any) -> Any:
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                payload = fp.read().decode("utf-8")
            logger.debug("Loading JSON file: %s", full_path)
            return json.loads(payload)

    class ServiceLoader(loaders.Loader):
        @instance_cache
        def load_service_model(self, service_name: str, type_name: str,
                               api_version: str | None = None) -> Any:
            if not hasattr(self, "_extras_processor"):  # made otherwise: botocore's way
                return super().load_service_model(service_name, type_name, api_version)
            try:
                self.list_api_versions(service_name, type_name)
            except DataNotFoundError:  # not on the search path: botocore's own error
                return super().load_service_model(service_name, type_name, api_version)
            if api_version is None:
                api_version = self.determine_latest_version(service_name, type_name)
            model = self.load_data(os.path.join(service_name, api_version, type_name))
            extras = self._find_extras(  # type: ignore[attr-defined]
                service_name, type_name, api_version)
            self._extras_processor.process(model, extras)
            return model

    return ServiceLoader, PlainJSONFileLoader


_LAYOUT = {"": ("instance_cache", "logger", "Loader", "JSONFileLoader"),
           "Loader": ("load_service_model", "list_api_versions", "determine_latest_version",
                      "load_data", "_find_extras"),
           "JSONFileLoader": ("_load_file", "load_file")}
"""The parts of ``botocore.loaders`` the loader above builds on (private ones included):
a botocore without one of them gets its own loader back, slower but working."""


def _known_layout(loaders: Any) -> bool:
    return all(hasattr(loaders if not owner else getattr(loaders, owner, None), name)
               for owner, names in _LAYOUT.items() for name in names)


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
