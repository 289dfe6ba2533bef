"""Nothing leaves the machine: the seal the pytest plugin puts on a test session.

A client made when a handler's module is imported (``boto3.client("dynamodb")`` at
module level, as users write) exists before any sandbox starts. botocore copies its
event handlers when a session is made, so moto answers a client only if moto's hook was
registered before its session was made, and the client signs with whatever credentials
the environment held then. Code that pytest imports before jobguard's plugin (a plugin
named with ``-p``) may have made such a client, or boto3's default session, with the
user's real credentials and endpoint. :func:`seal` therefore, once per process, when
pytest loads the plugin:

1. replaces the environment's AWS credentials, profiles, endpoint variables and config
   files with fake ones (the user's region is kept), so no client made from now on can
   sign with the user's own keys, and the instance metadata service is not asked;
2. forgets the sessions built from the environment before: boto3's default session and
   jobguard's own (:func:`jobguard._clients.reset`);
3. imports moto's interception, so every client made from now on is answered by a
   sandbox while one runs (``moto`` registers its hook when imported);
4. refuses, at botocore's send (``Endpoint._send``, patched on the class, so clients
   made before the seal are covered too), every request that no sandbox answered whose
   host is not loopback, the host read from the URL by urllib3's ``parse_url``, as
   botocore's HTTP session does when it connects: :class:`RequestLeftTheMachine`, naming
   the service, the URL and, when the request was signed with other keys than the
   session's fake ones, that it came from a client made before the seal;
5. adds an audit hook (:func:`sys.addaudithook`, every thread) that refuses, whatever
   library asks, a connection or datagram from an IPv4 or IPv6 socket to an address that
   is not loopback, and the lookup of a name other than ``localhost`` and the machine's
   own name: resolving a name is itself a request (DNS), and the name can carry data
   out. Unix sockets, loopback and lookups of address literals are left alone.
   ``socket.socket``'s ``connect``, ``connect_ex``, ``sendto`` and ``sendmsg`` refuse a
   name before the socket looks it up (the audit event comes after the lookup).

Not sealed: what ran before the seal (a plugin's import that already sent a request, and
a connection it left open, which a later request of the same session reuses);
the keys of a client made before it, which still sign its requests to loopback hosts;
other processes (they inherit the fake environment, not the refusals); networking done
below Python's socket module (a C library's own sockets); and what a proxy listening on
loopback forwards for other libraries than botocore (botocore's requests are checked by
their URL). The seal is not undone: an audit hook cannot be removed, so it holds for
the rest of the process.

Not for Lambda code: only :mod:`jobguard.pytest_plugin` calls it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

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
_INET: Final = (socket.AF_INET, socket.AF_INET6)
_SIGNED_BY = re.compile(r"Credential=([^/,\s]+)/")
_SIGNED_BY_QUERY = re.compile(r"[?&]X-Amz-Credential=([^%/&]+)")
_sealed_region: str | None = None


class RequestLeftTheMachine(JobGuardError):
    """A request in a test session would have left the machine (nothing here answered
    it), so it was refused before it was sent. Attributes: ``url`` (what was asked:
    a URL, ``tcp://host:port``, ``dns:name``), ``host`` (where it would have gone)."""

    def __init__(self, url: str, host: str, why: str = "") -> None:
        super().__init__(
            f"jobguard's testing kit refused {url} (host {host!r}): in a test session no "
            f"request leaves the machine{why}. Make AWS calls inside a test that uses the "
            f"jobguard_sandbox fixture (or `with Sandbox.start():`), talk to servers on "
            f"127.0.0.1 or localhost, or run pytest with -p no:jobguard for tests meant "
            f"to reach the network")
        self.url = url
        self.host = host


def session_region() -> str:
    """The region the session was sealed with (the user's, or us-east-1)."""
    return _sealed_region or os.environ.get("AWS_DEFAULT_REGION") or _DEFAULT_REGION


def seal() -> None:
    """Scrub the environment and install the refusals (idempotent; see the module doc)."""
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
    boto3 = sys.modules.get("boto3")
    if boto3 is not None:  # made from the real environment; the next is made from ours
        boto3.DEFAULT_SESSION = None  # type: ignore[attr-defined]
    clients = sys.modules.get("jobguard._clients")
    if clients is not None:
        clients.reset()
    # plain `pip install jobguard` (no [testing]) in a project that runs pytest: the plugin
    # is installed with the package, so seal without the sandbox's emulator (the refusals
    # below hold; jobguard_sandbox says which extra it needs)
    with contextlib.suppress(ImportError):
        import moto.core.models  # noqa: F401 - registers moto's before-send hook
    from botocore.endpoint import Endpoint

    Endpoint._send = _local_send(Endpoint._send)  # type: ignore[attr-defined]  # noqa: SLF001
    _sealed_region = region
    sys.addaudithook(_refuse_the_network)
    for method, where in (("connect", 0), ("connect_ex", 0), ("sendto", -1),
                          ("sendmsg", 3)):
        setattr(socket.socket, method, _names_refused(getattr(socket.socket, method), where))


def _names_refused(method: Any, where: int) -> Any:
    """``socket.socket.method`` refusing a name (localhost aside) at argument ``where``
    before the socket looks it up: CPython resolves an address given by name before it
    raises the ``socket.connect`` audit event, so the hook alone would see the name only
    after the lookup went out."""

    def guarded(sock: socket.socket, *args: Any) -> Any:
        if sock.family in _INET and -len(args) <= where < len(args):
            address = args[where]
            if (isinstance(address, tuple) and address and _sealed_region is not None
                    and not _is_literal(str(address[0]))):
                _refuse_unless_loopback(f"socket.{method.__name__}", sock, str(address[0]),
                                        address[1])
        return method(sock, *args)

    guarded.__name__ = guarded.__qualname__ = method.__name__
    guarded.__doc__ = method.__doc__
    return guarded


def _local_send(send: Any) -> Any:
    """botocore's ``Endpoint._send`` (reached only when no ``before-send`` hook, moto's
    or a fault harness's, answered), refusing what would leave the machine."""
    from urllib3.util.url import parse_url  # what botocore's URLLib3Session connects by

    def _send(endpoint: Any, request: Any) -> Any:
        url = str(request.url)
        host = parse_url(url).host or ""
        if not _is_loopback(host):
            raise RequestLeftTheMachine(
                url.split("?", 1)[0], host,
                f" (the {endpoint._endpoint_prefix} client's request){_signed_by(request)}")  # noqa: SLF001
        return send(endpoint, request)

    return _send


def _signed_by(request: Any) -> str:
    """Why the request had real keys, when it was signed with others than the fake ones."""
    found = (_SIGNED_BY.search(str(request.headers.get("Authorization", "")))
             or _SIGNED_BY_QUERY.search(str(request.url)))
    if found is None or found.group(1) == FAKE:
        return ""
    return (f"; it was signed with access key ...{found.group(1)[-4:]}, not the session's "
            f"fake one: a client or boto3 session made before jobguard sealed the session "
            f"(by a plugin pytest imported first: one named with -p, or an entry point) keeps "
            f"the credentials and endpoint it was made with; make it inside the test, or "
            f"name jobguard first: -p jobguard -p yourplugin")


def _refuse_the_network(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: a connection, datagram or name lookup that would leave the
    machine raises :class:`RequestLeftTheMachine` before it is made."""
    if not event.startswith("socket.") or _sealed_region is None:
        return
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock, address = args
        if sock.family in _INET and isinstance(address, tuple) and address:
            _refuse_unless_loopback(event, sock, str(address[0]), address[1])
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        name = args[0]
        if name:
            _refuse_a_lookup(event, name.decode("ascii", "replace")
                             if isinstance(name, bytes) else str(name))
    elif event == "socket.getnameinfo" and isinstance(args[0], tuple) and args[0]:
        _refuse_a_lookup(event, str(args[0][0]))


def _refuse_unless_loopback(event: str, sock: Any, host: str, port: Any) -> None:
    """A connection or datagram to ``host`` (an address, or a name the socket would
    look up itself: only ``localhost`` is let through)."""
    if _is_loopback(host):
        return
    scheme = "tcp" if sock.type == socket.SOCK_STREAM else "udp"
    what = "a connection" if event.startswith("socket.connect") else "a datagram"
    raise RequestLeftTheMachine(f"{scheme}://{host}:{port}", host,
                                f" ({what} to an address that is not loopback)")


def _refuse_a_lookup(event: str, name: str) -> None:
    """Looking ``name`` up: an address literal asks nobody (but its reverse lookup
    does), a name asks a DNS server unless it is localhost or this machine's own."""
    reverse = event in ("socket.gethostbyaddr", "socket.getnameinfo")
    if _is_literal(name):
        if not reverse or _is_loopback(name):
            return
        why = " (a reverse lookup of an address is a request)"
    elif _is_loopback(name) or _is_own_name(name):
        return
    else:
        why = (" (looking a name up is a request: only localhost and this machine's own "
               "name are looked up)")
    raise RequestLeftTheMachine(f"dns:{name}", name, why)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``host`` as an address literal (brackets and a zone allowed), or None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _is_literal(host: str) -> bool:
    return _address(host) is not None


def _is_loopback(host: str) -> bool:
    """A host on this machine by its spelling alone: a loopback address (IPv4-mapped
    too), the unspecified address (a connection to it reaches this machine), or
    ``localhost`` (the hosts file answers it; its subdomains may be asked of a DNS
    server). Nothing is looked up."""
    address = _address(host)
    if address is None:
        return host.lower().rstrip(".") == "localhost"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified


def _is_own_name(host: str) -> bool:
    """The machine's own name (what ``socket.getfqdn()`` and servers bound to every
    address look up; the hosts file answers it)."""
    return host.lower().rstrip(".") == socket.gethostname().lower()
