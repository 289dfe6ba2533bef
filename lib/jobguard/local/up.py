"""Your own CDK app, deployed into the local AWS with one command, and left running.

Run it in your project folder (where ``app.py`` is)::

    python -m jobguard.local.up --app "python app.py" --stack Billing -c drills=true
    . .jobguard-local/env           # points jobguard (and boto3) at the local AWS
    jobguard status invoice-mailer
    python -m jobguard.local.up --stop

It starts MiniStack (the local AWS: ``.venv-ministack`` in the project folder, else
``JOBGUARD_MINISTACK``), runs ``cdk bootstrap`` and ``cdk deploy STACK`` with your CDK CLI
(``node_modules/.bin/cdk``, else ``cdk`` on PATH) and ``-c jobguard:local=true`` plus
your ``-c`` values, applies the table's TTL, and leaves MiniStack running. It prints the
variables to export and writes them to ``.jobguard-local/env``; its logs are there too.
Run again while it runs, it deploys into the same local AWS. ``--stop`` stops it and
says what it removed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from .demo import KEPT, _is_ours, _note_kept, _write_whole, stop_kept
from .deploy import NoJobTable
from .ministack import VERSION, LocalStack, client_env

__all__ = ["STATE_DIR", "cdk_cli", "main", "ministack_cli"]

STATE_DIR = ".jobguard-local"
"""The folder, in the project, that holds the kept local AWS's note, its logs and ``env``."""
ENV_FILE = "env"
CDK_VERSION = "2.1148.1"
"""The CDK CLI release jobguard's own stack is deployed with (its ``package.json``)."""
_STACK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")
_CONTEXT_KEY = re.compile(r"[A-Za-z0-9_:.-]+")


class UsageError(Exception):
    """A prerequisite or an option is wrong: said in one line, nothing started."""


def cdk_cli(project: Path) -> Path:
    """The CDK CLI: the project's own (``npm install aws-cdk``), else ``cdk`` on PATH."""
    local = project / "node_modules" / ".bin" / "cdk"
    if local.exists():
        return local
    found = shutil.which("cdk")
    if found:
        return Path(found)
    raise UsageError(
        f"no CDK CLI: neither {local} nor `cdk` on PATH; install it in the project "
        f"folder: npm install aws-cdk@{CDK_VERSION} (it needs Node 22 or 24)")


def ministack_cli(project: Path) -> Path:
    """MiniStack's command: ``JOBGUARD_MINISTACK``, else the project's ``.venv-ministack``."""
    override = os.environ.get("JOBGUARD_MINISTACK")
    if override:
        if not Path(override).is_file():
            raise UsageError(f"JOBGUARD_MINISTACK: {override} is not a file (it names "
                             "the ministack command)")
        return Path(override)
    local = project / ".venv-ministack" / "bin" / "ministack"
    if local.is_file():
        return local
    raise UsageError(
        f"no MiniStack: {local} is missing; install it into a venv of its own (it pins "
        f"botocore exactly): python3 -m venv .venv-ministack && .venv-ministack/bin/pip "
        f"install ministack=={VERSION} (or set JOBGUARD_MINISTACK to a ministack command)")


def _context(values: Sequence[str]) -> list[str]:
    args: list[str] = []
    for value in values:
        key, sep, _ = value.partition("=")
        if not sep or not _CONTEXT_KEY.fullmatch(key):
            raise UsageError(f"-c: {value!r} is not key=value (e.g. -c drills=true)")
        if key == "jobguard:local":
            raise UsageError("-c: jobguard:local is set by this command (always true)")
        args += ["-c", value]
    return args


def env_lines(endpoint: str, stack: str) -> list[str]:
    """What points ``jobguard`` and every AWS SDK in a shell at the local AWS."""
    env = {**client_env(endpoint), "JOBGUARD_STACK": stack}
    env.pop("AWS_EC2_METADATA_DISABLED")
    return [f"export {k}={v}" for k, v in env.items()]


def _running(state: Path) -> tuple[int, str] | None:
    """The kept local AWS noted in ``state``, when it still runs: (pid, endpoint)."""
    import json

    try:
        kept = json.loads((state / "kept.json").read_text())
        pid, endpoint, workdir = int(kept["pid"]), str(kept["endpoint"]), kept.get("workdir")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (pid, endpoint) if _is_ours(pid, workdir) else None


def stop(project: Path) -> str:
    """Stop the kept local AWS of ``project``; what was stopped and removed, in one line."""
    state = project / STATE_DIR
    said = stop_kept(state)
    env = state / ENV_FILE
    if env.exists():
        env.unlink()
        said += f", {env}" if "; removed " in said else f"; removed {env}"
    return said


def up(project: Path, *, app: str, stack: str, context: Sequence[str]) -> int:
    """Check, start (or reuse), deploy, keep; print the exports. The exit code."""
    import signal

    from .deploy import deploy

    if not _STACK_NAME.fullmatch(stack):
        raise UsageError(f"--stack: {stack!r} is not a stack name (letters, digits and "
                         "hyphens, starting with a letter)")
    options = _context(context)
    cdk = cdk_cli(project)
    state = project / STATE_DIR
    running = _running(state)
    ministack = ministack_cli(project) if running is None else None
    state.mkdir(exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    aws: LocalStack | None = None
    if running is not None:
        pid, endpoint = running
        print(f"local AWS already running at {endpoint} (pid {pid}): deploying into it")
    else:
        os.environ["JOBGUARD_MINISTACK"] = str(ministack)  # LocalStack.start runs it
        aws = LocalStack.start(log_path=state / "ministack.log")
        endpoint = aws.endpoint
        if aws.process is not None:  # noted now: were this process killed while deploying
            # (MiniStack runs in a session of its own and outlives it), --stop finds it
            _note_kept(state, pid=aws.process.pid, endpoint=endpoint, workdir=aws.workdir)
        print(f"local AWS: MiniStack at {endpoint} (log: {state / 'ministack.log'})")
    jsii_cache = os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT") or str(
        Path.home() / ".cache" / "aws" / "jsii" / "package-cache")
    print(f"deploying {stack} with {cdk}: cdk bootstrap, then cdk deploy "
          f"(a minute or two; log: {state / 'deploy.log'})", flush=True)
    try:
        outputs = deploy(endpoint, stack=stack, app=app, cwd=project, cdk=cdk,
                         context=options, log=state / "deploy.log",
                         env={"JSII_RUNTIME_PACKAGE_CACHE_ROOT": jsii_cache},
                         say=lambda line: print(line, flush=True))
    except BaseException:
        if aws is not None:
            aws.stop()
            (state / KEPT).unlink(missing_ok=True)
            print(f"the deployment failed: stopped the local AWS at {endpoint}",
                  file=sys.stderr)
        raise
    if aws is not None:  # kept running (noted above): not stopped when this process ends
        aws.process = None
        aws.workdir = None  # its function workers still use it
    lines = env_lines(endpoint, stack)
    _write_whole(state / ENV_FILE, "\n".join(lines) + "\n")
    print(f"\n{stack} is deployed (table {outputs.get('TableName')}). Point jobguard at it, "
          f"in this shell:\n  . {STATE_DIR}/{ENV_FILE}\nwhich sets:")
    print("\n".join(f"  {line}" for line in lines))
    print("then: jobguard status JOB; jobguard drill --job JOB; jobguard timeline JOB\n"
          "When done: python -m jobguard.local.up --stop")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobguard.local.up", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--app", help='the command that synthesizes your app, as `cdk '
                        '--app` takes it (e.g. "python app.py")')
    parser.add_argument("--stack", help="the stack your app defines, to deploy")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE",
                        help="a context value for the app (repeatable), e.g. -c drills=true")
    parser.add_argument("--dir", type=Path, default=Path.cwd(),
                        help="the project folder (default: the current one)")
    parser.add_argument("--stop", action="store_true",
                        help="stop the local AWS this command left running, say what it "
                             "removed")
    args = parser.parse_args(argv)
    project = args.dir.resolve()
    if not project.is_dir():
        print(f"error: --dir: {args.dir} is not a folder (the project folder, where your "
              "app is)", file=sys.stderr)
        return 2
    if args.stop:
        print(stop(project))
        return 0
    for option in ("app", "stack"):
        if not getattr(args, option):
            parser.error(f"--{option} is required (e.g. --app \"python app.py\" --stack "
                         "Billing)")
    try:
        return up(project, app=args.app, stack=args.stack, context=args.context)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except NoJobTable as exc:
        print(f"error: --stack: {exc}", file=sys.stderr)
        return 1
    except (RuntimeError, TimeoutError) as exc:  # cdk failed, MiniStack did not start
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
