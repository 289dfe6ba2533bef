"""Deploy the real CDK stack into the local AWS, the way a user deploys it to AWS.

``cdk bootstrap`` then ``cdk deploy`` with the pinned CDK CLI (``node_modules``), the
SDK pointed at the local endpoint by ``AWS_ENDPOINT_URL``. Two context values differ
from a cloud deployment, and each answers a measured gap of the emulator:

- ``jobguard:local=true``: the functions run on the emulator's own interpreter, so the
  dependency layer holds wheels for this machine; and the emulator leaves Scheduler's
  ``<aws.scheduler.scheduled-time>`` literal (jobguard rejects such a tick, as it must
  on AWS), so the schedules are created disabled and ``jobguard drill`` delivers ticks
  itself, with Scheduler's payload and the time filled in;
- ``jobguard:drills=true``: the example jobs honour drill fault switches and run with a
  compressed clock (12 s leases), so that a drill that waits out a lease takes seconds.

The emulator also drops the table's TTL from CloudFormation, so it is applied here with
``UpdateTimeToLive`` (the same attribute the template declares).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..deployment import Deployment
from ..schema import TTL_ATTRIBUTE
from .ministack import ACCOUNT, REGION, ROOT, client_env
from .node import with_pinned_node

__all__ = ["DEFAULT_STACK", "NoJobTable", "deploy", "inspect_deployment", "stack_outputs"]

DEFAULT_STACK = "JobGuard-local"
"""The local deployment's stack (``infra.settings``: a local stack's name ends in
``-local``, so it can never replace a production stack)."""
CDK = ROOT / "node_modules" / ".bin" / "cdk"


def _cdk_env(endpoint: str) -> dict[str, str]:
    # the CDK CLI and the jsii under it on the Node the repository pins (.venv/bin/node)
    env = with_pinned_node({
        **os.environ, **client_env(endpoint),
        "JSII_RUNTIME_PACKAGE_CACHE_ROOT": str(ROOT / ".jsii-cache"),
        "CDK_DISABLE_CLI_TELEMETRY": "true", "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_DEFAULT_ACCOUNT": ACCOUNT, "CDK_DEFAULT_REGION": REGION})
    env.pop("AWS_PROFILE", None)
    return env


def _cdk(args: list[str], endpoint: str, log: Path, *, cwd: Path = ROOT,
         env: Mapping[str, str] | None = None, cdk: Path = CDK) -> float:
    if not cdk.exists():
        raise FileNotFoundError(f"{cdk} is missing: run `npm ci` (make demo does)")
    started = time.monotonic()
    with open(log, "ab") as out:
        out.write(f"\n$ cdk {' '.join(args)}\n".encode())
        out.flush()
        done = subprocess.run([str(cdk), *args], cwd=cwd,
                              env={**_cdk_env(endpoint), **(env or {})},
                              stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode:
        raise RuntimeError(f"cdk {args[0]} failed (exit {done.returncode}); see {log}")
    return time.monotonic() - started


class NoJobTable(RuntimeError):
    """The stack deployed has no ``TableName`` output: it holds no jobguard ``JobTable``
    (another stack of the app was named)."""

    def __init__(self, stack: str, outputs: Sequence[str]) -> None:
        super().__init__(f"{stack} has no TableName output (its outputs: "
                         f"{', '.join(outputs) or 'none'}); name the stack that holds "
                         "jobguard's JobTable")
        self.stack = stack


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    """The stack's outputs, read back through the CloudFormation API."""
    described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def deploy(endpoint: str, *, stack: str = DEFAULT_STACK, drills: bool = True,
           log: Path | None = None, say: Callable[[str], None] = print,
           app: str | None = None, cwd: Path = ROOT, context: Sequence[str] = (),
           env: Mapping[str, str] | None = None, cdk: Path = CDK) -> dict[str, str]:
    """Bootstrap, deploy, apply TTL; return the stack's outputs.

    By default this repository's app (``cdk.json``) with its context switches; with
    ``app`` (a command, ``cdk --app``) any CDK app built with jobguard's constructs, run
    in ``cwd`` with ``env`` added, deployed with ``jobguard:local=true`` and the
    ``context`` given (``["-c", "key=value", ...]``), which the constructs honour;
    ``cdk`` is the CDK CLI (default: this repository's pinned one, ``node_modules``)."""
    import boto3

    log = log or ROOT / ".local" / "deploy.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    app_args = ["--app", app] if app else []
    seconds = _cdk(["bootstrap", f"aws://{ACCOUNT}/{REGION}", "--no-notices", *app_args,
                    "-c", "jobguard:local=true", *context], endpoint, log, cwd=cwd, env=env,
                   cdk=cdk)
    say(f"  cdk bootstrap               {seconds:5.1f} s")
    options = ["-c", "jobguard:local=true", *context]
    if app is None:
        options += ["-c", f"jobguard:stackName={stack}"]
        if drills:
            options += ["-c", "jobguard:drills=true"]
    seconds = _cdk(["deploy", stack, *app_args, "--require-approval", "never",
                    "--no-notices", "--progress", "events", *options], endpoint, log,
                   cwd=cwd, env=env, cdk=cdk)
    say(f"  cdk deploy {stack:<16} {seconds:5.1f} s")
    session = boto3.session.Session(region_name=REGION, aws_access_key_id="test",
                                    aws_secret_access_key="test")
    cfn = session.client("cloudformation", endpoint_url=endpoint)
    outputs = stack_outputs(cfn, stack)
    if "TableName" not in outputs:
        raise NoJobTable(stack, sorted(outputs))
    ddb = session.client("dynamodb", endpoint_url=endpoint)
    ddb.update_time_to_live(
        TableName=outputs["TableName"],
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE})
    say(f"  TTL on {outputs['TableName']} ({TTL_ATTRIBUTE}): applied after deploy "
        "(the emulator drops it from the template)")
    return outputs


def inspect_deployment(session: Any, endpoint: str | None, deployment: Deployment
                       ) -> list[tuple[str, bool]]:
    """What the library needs from a deployed stack, read through the AWS APIs (not the
    template), found through its outputs (``deployment``): the table with its TTL and
    index, each trigger queue with its mapping to its job's function reporting partial
    batch failures, the recovery function and its execute alias."""
    def make(service: str) -> Any:
        return session.client(service, endpoint_url=endpoint)

    from ..recovery import EXECUTE_ALIAS
    from ..schema import UNRESOLVED_INDEX

    ddb, sqs, lam = make("dynamodb"), make("sqs"), make("lambda")
    found: list[tuple[str, bool]] = []
    table = deployment.table
    described = ddb.describe_table(TableName=table)["Table"]
    keys = sorted(k["AttributeName"] for k in described["KeySchema"])
    found.append((f"table {table}: keys {keys}", keys == ["pk", "sk"]))
    indexes = [i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])]
    found.append((f"index {UNRESOLVED_INDEX}", UNRESOLVED_INDEX in indexes))
    ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    found.append((f"TTL on {ttl.get('AttributeName')}: {ttl.get('TimeToLiveStatus')}",
                  ttl.get("AttributeName") == TTL_ATTRIBUTE
                  and ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")))
    for name, job in sorted(deployment.jobs.items()):
        if job.queue_url is None:
            continue
        attrs = sqs.get_queue_attributes(QueueUrl=job.queue_url,
                                         AttributeNames=["All"])["Attributes"]
        mappings = lam.list_event_source_mappings(
            EventSourceArn=attrs["QueueArn"], FunctionName=job.function)["EventSourceMappings"]
        partial = [m for m in mappings
                   if "ReportBatchItemFailures" in (m.get("FunctionResponseTypes") or [])]
        found.append((f"{name} trigger queue: FIFO {attrs.get('FifoQueue')}, redrive "
                      f"{'RedrivePolicy' in attrs}, mapping with partial batch responses "
                      f"{len(partial)}", attrs.get("FifoQueue") == "true"
                      and "RedrivePolicy" in attrs and len(partial) == 1))
    if deployment.recovery_function is None:
        found.append((f"recovery function: stack {deployment.stack} has no "
                      "RecoveryFunctionName output", False))
        return found
    recovery = lam.get_function(FunctionName=deployment.recovery_function)
    found.append((f"recovery function {recovery['Configuration']['FunctionName']}",
                  recovery["Configuration"]["State"] in ("Active", "Pending")))
    alias = lam.get_alias(FunctionName=deployment.recovery_function, Name=EXECUTE_ALIAS)
    found.append((f"recovery alias {EXECUTE_ALIAS} -> {alias.get('FunctionVersion')} "
                  "(the only way in that executes)",
                  alias.get("FunctionVersion") == "$LATEST"))
    return found
