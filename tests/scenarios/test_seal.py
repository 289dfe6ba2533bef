"""The test seal (``jobguard.pytest_plugin``, ``jobguard._offline``): from the moment
pytest imports the plugin, nothing a test does reaches another machine.

Each attack runs in a pytest of its own on a small project (``@pytest.mark.process``),
with the user's own credentials (AWS's documented example keys) and an endpoint on a
host that is not loopback in its environment. Its conftest adds an audit hook after the
seal's that records, and stops, any connection or name lookup the seal let through to
another host: a test passes only if jobguard refused first, before any packet. The fast
tests at the end check the same refusals in this (sealed) session.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from urllib3.util import parse_url

from jobguard._offline import RequestLeftTheMachine

REMOTE = "192.0.2.1"
"""TEST-NET-1 (RFC 5737): no host answers there; a connection would hang, not fail."""
NAME = "nothing-here.invalid"
"""A name no resolver knows (RFC 6761): a lookup that was made fails with gaierror, so a
refusal by jobguard proves the lookup was never made."""
USERS_KEY, USERS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ONE_TRY = Config(connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1})

CONFTEST = '''
import ipaddress
import socket
import sys

ESCAPED = []


class Escaped(BaseException):
    """A connection or lookup that the seal let through to another host."""


def _remote(host, lookup=False):
    if host in (None, "", "localhost", socket.gethostname()):
        return False
    try:
        address = ipaddress.ip_address(str(host).strip("[]"))
    except ValueError:
        return True  # a name: looking it up is a request
    return not lookup and not address.is_loopback  # looking an address up asks nobody


def _watch(event, args):
    if event in ("socket.connect", "socket.sendto"):
        sock, address = args
        if sock.family in (socket.AF_INET, socket.AF_INET6) and _remote(address[0]):
            ESCAPED.append((event, address))
            raise Escaped(f"{event} {address}")
    elif event in ("socket.getaddrinfo", "socket.gethostbyname") and _remote(args[0], True):
        ESCAPED.append((event, args[0]))
        raise Escaped(f"{event} {args[0]}")


sys.addaudithook(_watch)  # after the seal's (pytest imported jobguard's plugin first)
'''

USERS_PLUGIN = '''
import os

import boto3
from botocore.config import Config

ONE_TRY = Config(connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1})
KEY_AT_IMPORT = os.environ.get("AWS_ACCESS_KEY_ID")
boto3.setup_default_session(region_name="eu-west-1")
EARLY = boto3.client("s3", config=ONE_TRY)  # from the default session: its keys are cached
'''

DEFAULT_SESSION_TESTS = """
import boto3
import pytest

import usersplugin
from conftest import ESCAPED
from jobguard._offline import RequestLeftTheMachine


def test_a_new_client_from_the_default_session_is_refused():
    with pytest.raises(RequestLeftTheMachine) as refused:
        boto3.client("sts", config=usersplugin.ONE_TRY).get_caller_identity()
    assert refused.value.host.endswith("amazonaws.com") and ESCAPED == []


def test_in_a_sandbox_the_default_session_is_a_new_one_it_answers(jobguard_sandbox):
    identity = boto3.client("sts", config=usersplugin.ONE_TRY).get_caller_identity()
    assert identity["Account"] == "123456789012" and ESCAPED == []


def test_the_plugin_saw_the_keys():
    print("KEY AT IMPORT:", usersplugin.KEY_AT_IMPORT)
"""

EARLY_CLIENT_TESTS = DEFAULT_SESSION_TESTS + f"""

def test_the_client_made_before_is_refused():
    with pytest.raises(RequestLeftTheMachine) as refused:
        usersplugin.EARLY.list_buckets()
    assert refused.value.host == "{REMOTE}" and ESCAPED == []
    print("EARLY REFUSED:", refused.value)


def test_the_client_made_before_is_refused_in_a_sandbox_too(jobguard_sandbox):
    with pytest.raises(RequestLeftTheMachine):
        usersplugin.EARLY.list_buckets()
    assert ESCAPED == []
"""

SEALED_FIRST_TESTS = DEFAULT_SESSION_TESTS + """

def test_the_plugins_client_is_refused_outside_a_sandbox():
    with pytest.raises(RequestLeftTheMachine) as refused:
        usersplugin.EARLY.list_buckets()
    assert refused.value.host.endswith("amazonaws.com") and ESCAPED == []


def test_the_plugins_client_is_answered_in_a_sandbox(jobguard_sandbox):
    assert usersplugin.EARLY.list_buckets()["Buckets"] == [] and ESCAPED == []
"""

OTHER_HTTP_TESTS = f'''
import http.client
import http.server
import socket
import threading
import urllib.request

import pytest
import requests

from conftest import ESCAPED
from jobguard._offline import RequestLeftTheMachine


@pytest.fixture
def local_server():
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"local")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("call", [
    lambda: urllib.request.urlopen("http://{REMOTE}/", timeout=2),
    lambda: http.client.HTTPConnection("{REMOTE}", timeout=2).request("GET", "/"),
    lambda: requests.get("http://{REMOTE}/", timeout=2),
    lambda: socket.create_connection(("{REMOTE}", 80), timeout=2),
    lambda: socket.socket().connect_ex(("{REMOTE}", 80)),
    lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("{REMOTE}", 53)),
], ids=["urllib", "http.client", "requests", "create_connection", "connect_ex", "udp"])
def test_a_remote_address_is_refused(call):
    with pytest.raises(RequestLeftTheMachine) as refused:
        call()
    assert refused.value.host == "{REMOTE}" and ESCAPED == []


@pytest.mark.parametrize("call", [
    lambda: urllib.request.urlopen("http://{NAME}/", timeout=2),
    lambda: socket.getaddrinfo("{NAME}", 443),
    lambda: socket.gethostbyname("{NAME}"),
    lambda: socket.create_connection(("{NAME}", 80), timeout=2),
    lambda: socket.socket().connect(("{NAME}", 80)),
    lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("{NAME}", 53)),
], ids=["urllib", "getaddrinfo", "gethostbyname", "create_connection", "connect", "udp"])
def test_a_name_is_not_looked_up(call):
    with pytest.raises(RequestLeftTheMachine) as refused:
        call()
    assert refused.value.host == "{NAME}" and ESCAPED == []


def test_loopback_and_unix_sockets_still_work(local_server):
    for host in ("127.0.0.1", "localhost"):
        with urllib.request.urlopen(f"http://{{host}}:{{local_server}}/", timeout=5) as answer:
            assert answer.read() == b"local"
    assert requests.get(f"http://127.0.0.1:{{local_server}}/", timeout=5).text == "local"
    socket.create_connection(("127.0.0.1", local_server), timeout=5).close()
    left, right = socket.socketpair(socket.AF_UNIX)
    left.sendall(b"ok")
    assert right.recv(2) == b"ok"
    assert ESCAPED == []
'''

ENDPOINT_TESTS = '''
import http.server
import threading

import boto3
import pytest
from botocore.config import Config
from urllib3.util import parse_url

from conftest import ESCAPED
from jobguard._offline import RequestLeftTheMachine

# (endpoint, what happens): "served" by the server on 127.0.0.1, or refused naming the
# host urllib3 (botocore's HTTP library) would have connected to.
ENDPOINTS = [
    ("http://host\\\\@127.0.0.1:{port}", "host"),  # the authority ends at the backslash
    ("http://127.0.0.1:{port}@evil", "evil"),  # userinfo before the host
    ("http://[::1]:{port}@evil", "evil"),
    ("http://evil#@127.0.0.1:{port}", "evil"),  # the rest is a fragment
    ("http://evil/@127.0.0.1:{port}", "evil"),  # the rest is a path
    ("http://127.0.0.1%2f@evil:{port}", "evil"),  # percent-encoding in the userinfo
    ("HTTP://EVIL:{port}", "evil"),  # uppercase scheme and host
    ("http://127.1:{port}", "127.1"),  # a name to urllib3 (the resolver reads 127.0.0.1)
    ("http://x.localhost:{port}", "x.localhost"),  # a name a resolver may forward
    ("http://user:secret@127.0.0.1:{port}", "served"),  # userinfo, then loopback
    ("http://127.0.0.1:{port}\\\\@evil", "served"),  # urllib3 connects to 127.0.0.1
    ("http://127.0.0.1:{port}#@evil", "served"),
    ("HTTP://127.0.0.1:{port}", "served"),
    ("http://localhost:{port}", "served"),
]


@pytest.fixture(scope="module")
def local_server():
    served = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            served.append(self.path)
            body = b"<ListAllMyBucketsResult><Buckets/></ListAllMyBucketsResult>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], served
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("endpoint", "outcome"), ENDPOINTS)
def test_an_endpoint_goes_where_urllib3_connects_or_nowhere(local_server, endpoint,
                                                            outcome):
    port, served = local_server
    url = endpoint.format(port=port)
    connects_to = parse_url(url).host
    assert (outcome == "served") == (connects_to in ("127.0.0.1", "localhost"))
    client = boto3.client("s3", endpoint_url=url, config=Config(
        connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1}))
    before = len(served)
    if outcome == "served":
        client.list_buckets()
        assert len(served) == before + 1
    else:
        with pytest.raises(RequestLeftTheMachine) as refused:
            client.list_buckets()
        assert refused.value.host == connects_to == outcome
        assert len(served) == before
    assert ESCAPED == []
'''

NO_PLUGIN_TESTS = f'''
import os
import socket
import sys

import pytest

from conftest import ESCAPED, Escaped


def test_without_the_plugin_nothing_is_sealed():
    assert os.environ["AWS_ACCESS_KEY_ID"] == "{USERS_KEY}"
    assert "jobguard._offline" not in sys.modules
    with pytest.raises(Escaped):  # the conftest's watch, not jobguard, stopped it
        socket.create_connection(("{REMOTE}", 80), timeout=2)
    assert ESCAPED == [("socket.connect", ("{REMOTE}", 80))]
'''


def _users_env(**extra: str) -> dict[str, str]:
    """A user's shell: nothing of this session's pytest or seal, their own keys, an
    endpoint that is not loopback, no proxy."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "JOBGUARD_", "AWS_", "PYTEST_"))
           and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update(AWS_ACCESS_KEY_ID=USERS_KEY, AWS_SECRET_ACCESS_KEY=USERS_SECRET,
               AWS_REGION="eu-west-1", AWS_ENDPOINT_URL=f"http://{REMOTE}",
               AWS_MAX_ATTEMPTS="1", **extra)
    return env


def _pytest(project: Path, tests: str, *args: str,
            **env: str) -> subprocess.CompletedProcess[str]:
    """Run pytest on a project of a conftest, the user's plugin and ``tests``."""
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (project / "usersplugin.py").write_text(textwrap.dedent(USERS_PLUGIN))
    (project / "test_attack.py").write_text(textwrap.dedent(tests))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-p",
         "no:xdist", "-p", "no:randomly", *args, "test_attack.py"],
        cwd=project, env=_users_env(PYTHONPATH=str(project), **env), capture_output=True,
        text=True, timeout=120, check=False)


def _passed(done: subprocess.CompletedProcess[str], count: int) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{count} passed" in done.stdout, done.stdout
    return done.stdout


@pytest.mark.process
def test_a_client_made_by_a_plugin_named_with_p_gets_no_request_out(tmp_path: Path) -> None:
    # GIVEN the user's plugin, named with -p (pytest imports it before jobguard's), that
    # makes boto3's default session and an S3 client from it with the user's own keys
    # and endpoint (a host that is not loopback)
    # WHEN tests call that client (outside and inside a sandbox) and a new client of the
    # default session
    out = _passed(_pytest(tmp_path, EARLY_CLIENT_TESTS, "-p", "usersplugin"), 5)
    # THEN each is refused by jobguard before any connection or lookup, the refusal says
    # the client was made before the seal, and the sandbox answers the default session
    assert f"KEY AT IMPORT: {USERS_KEY}" in out  # the attack: the plugin had the real keys
    assert "made before jobguard sealed the session" in out
    assert f"access key ...{USERS_KEY[-4:]}" in out and USERS_SECRET not in out


@pytest.mark.process
def test_a_client_made_by_a_plugin_in_pytest_plugins_gets_no_request_out(
        tmp_path: Path) -> None:
    # GIVEN the same plugin named in PYTEST_PLUGINS (pytest imports it after the
    # entry points, so after jobguard's plugin has sealed the session)
    # WHEN the same tests run
    out = _passed(_pytest(tmp_path, SEALED_FIRST_TESTS, PYTEST_PLUGINS="usersplugin"), 5)
    # THEN the plugin never saw the user's keys nor their endpoint: its client is
    # answered by the sandbox, and refused outside one
    assert "KEY AT IMPORT: testing" in out


@pytest.mark.process
def test_naming_jobguard_first_seals_before_the_users_plugin(tmp_path: Path) -> None:
    # GIVEN -p jobguard before -p usersplugin (the advice in the refusal)
    # WHEN the tests run
    out = _passed(_pytest(tmp_path, SEALED_FIRST_TESTS, "-p", "jobguard", "-p",
                          "usersplugin"), 5)
    # THEN the plugin was imported into a sealed session
    assert "KEY AT IMPORT: testing" in out


@pytest.mark.process
def test_http_outside_botocore_is_refused_and_loopback_is_not(tmp_path: Path) -> None:
    # GIVEN tests that reach a host that is not loopback through urllib, http.client,
    # requests, a raw TCP socket, connect_ex and UDP, look up a name, and talk to a
    # server on 127.0.0.1 and over a Unix socket pair
    # WHEN they run in a sealed session
    # THEN the remote ones are refused by jobguard before any connection or lookup, and
    # the local ones work
    _passed(_pytest(tmp_path, OTHER_HTTP_TESTS), 13)


@pytest.mark.process
def test_an_endpoint_is_read_as_the_http_library_connects(tmp_path: Path) -> None:
    # GIVEN endpoints that read as loopback to one URL parser and as another host to
    # urllib3 (backslash, userinfo, fragment, path, percent-encoding, uppercase), and
    # the reverse
    # WHEN a client of each is called
    # THEN it reaches the server on 127.0.0.1 exactly when urllib3 connects there, and
    # otherwise is refused naming the host urllib3 would have connected to
    _passed(_pytest(tmp_path, ENDPOINT_TESTS), 14)


@pytest.mark.process
def test_p_no_jobguard_turns_the_seal_off(tmp_path: Path) -> None:
    # GIVEN -p no:jobguard WHEN a test connects to a remote host
    # THEN jobguard neither scrubbed the keys nor refused (the conftest's watch stops it)
    _passed(_pytest(tmp_path, NO_PLUGIN_TESTS, "-p", "no:jobguard"), 1)


# -- the same refusals in this session (sealed by the plugin) -------------------------


@pytest.mark.parametrize("endpoint", [
    "http://host\\@127.0.0.1", "http://127.0.0.1@evil", "http://[::1]@evil",
    "http://evil#@127.0.0.1", "http://127.0.0.1%2f@evil", "HTTP://EVIL",
    "http://x.localhost:4566"])
def test_an_endpoint_that_is_not_loopback_to_urllib3_is_refused(endpoint: str) -> None:
    # GIVEN a client whose endpoint some parsers read as loopback
    client = boto3.client("s3", endpoint_url=endpoint, config=ONE_TRY)
    # WHEN it is called THEN it is refused, naming the host urllib3 would connect to
    with pytest.raises(RequestLeftTheMachine) as refused:
        client.list_buckets()
    assert refused.value.host == parse_url(endpoint).host


def test_a_client_with_other_keys_is_refused_saying_it_was_made_before_the_seal() -> None:
    # GIVEN a client signing with keys that are not the session's fake ones (as one
    # made before the seal does)
    client = boto3.client("sts", region_name="eu-west-1", aws_access_key_id=USERS_KEY,
                          aws_secret_access_key=USERS_SECRET, config=ONE_TRY)
    # WHEN it is called THEN the refusal names the service and says why it had them
    with pytest.raises(RequestLeftTheMachine, match="made before jobguard sealed") as refused:
        client.get_caller_identity()
    assert "sts client" in str(refused.value) and USERS_SECRET not in str(refused.value)
    assert f"...{USERS_KEY[-4:]}" in str(refused.value) and USERS_KEY not in str(refused.value)


@pytest.mark.parametrize(("call", "host"), [
    (lambda: socket.create_connection((REMOTE, 80), timeout=2), REMOTE),
    (lambda: socket.socket(socket.AF_INET6).connect_ex(("2001:db8::1", 80)), "2001:db8::1"),
    (lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", (REMOTE, 53)),
     REMOTE),
    (lambda: socket.socket().connect((NAME, 80)), NAME),
    (lambda: socket.getaddrinfo(NAME, 443), NAME),
    (lambda: socket.gethostbyaddr(REMOTE), REMOTE),
], ids=["tcp", "tcp6", "udp", "tcp-to-a-name", "lookup", "reverse-lookup"])
def test_a_socket_to_another_host_is_refused(call, host: str) -> None:
    with pytest.raises(RequestLeftTheMachine) as refused:
        call()
    assert refused.value.host == host


def test_a_loopback_connection_is_let_through() -> None:
    # GIVEN a loopback port nobody listens on (bound, not listening)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        # WHEN a connection is made to it THEN the kernel refuses it, not jobguard
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
    # AND localhost and this machine's own name are looked up (as http.server does)
    assert socket.getaddrinfo("localhost", port) and socket.getfqdn()


NO_MOTO = '''
import sys

sys.modules["moto"] = None  # as in a project that installed jobguard without [testing]
'''


@pytest.mark.process
def test_without_the_testing_extra_pytest_still_runs_sealed(tmp_path: Path) -> None:
    # GIVEN a project that installed plain jobguard (no moto) and runs its own tests
    (tmp_path / "nomoto.py").write_text(NO_MOTO)
    done = _pytest(tmp_path, f'''
        import socket

        import pytest

        from conftest import ESCAPED
        from jobguard._offline import RequestLeftTheMachine


        def test_the_seal_holds_without_the_emulator():
            with pytest.raises(RequestLeftTheMachine):
                socket.create_connection(("{REMOTE}", 80), timeout=2)
            assert ESCAPED == []


        def test_the_sandbox_says_which_extra_it_needs(jobguard_sandbox):
            pass
    ''', "-p", "nomoto")
    # THEN pytest starts (the plugin that comes with the package does not stop it), the
    # seal holds, and only the test asking for the sandbox fails, naming the extra
    assert "1 passed" in done.stdout and "1 error" in done.stdout, done.stdout + done.stderr
    assert "jobguard[testing]" in done.stdout or "moto" in done.stdout, done.stdout


def test_the_testing_extra_needs_a_pytest_that_seals_at_import() -> None:
    """The plugin seals when imported only if pytest says it is running (the
    ``PYTEST_VERSION`` variable, pytest 8.2 and later); under an older pytest it seals
    when the first conftest loads, after the entry-point plugins imported before it
    made their clients. So ``jobguard[testing]`` accepts no pytest older than 8.2."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml")
                            .read_text())["project"]
    (pytest_req,) = [Requirement(r) for r in project["optional-dependencies"]["testing"]
                     if Requirement(r).name == "pytest"]
    assert not any(pytest_req.specifier.contains(v) for v in ("8.0.0", "8.1.2")), pytest_req
