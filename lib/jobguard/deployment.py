"""What a stack built with jobguard's constructs tells the operator's tools: its outputs.

Every stack made with :mod:`jobguard.cdk` has these CloudFormation outputs, whoever wrote
the stack, so that ``jobguard --stack NAME ...`` (every command, ``drill`` and
``runbook`` included) finds what it needs from the stack's name alone:

==============================  ===========================================================
output                          value
==============================  ===========================================================
``TableName``                   the jobguard table (:class:`jobguard.cdk.JobTable`)
``AlarmTopicArn``               the topic every alarm notifies, or ``off: <reason>`` when
                                the stack was built with ``alarms_off(reason=...)``
``RecoveryFunctionName``        the recovery function (plans)
``RecoveryExecuteArn``          its ``execute`` alias (the only way it executes)
``<Job>Job``                    per job (``crm-sync`` -> ``CrmSyncJob``): JSON, see
                                :class:`DeployedJob`
``<Job>ReconcilerFunctionName`` the job's reconciler, when it has one
==============================  ===========================================================

A job's output is one JSON object (one output per job keeps a fleet of jobs inside
CloudFormation's 200 outputs): its function, its trigger queue, whether the deployment
is drillable, the runbook link the stack's author set, for a job of a
:class:`jobguard.cdk.JobFleet` the fleet's name (``fleet``, written only then: an output
without it, an older one included, is a job with its own alarms), and the job's definition *as
deployed* (a drills deployment's compressed clock, not the source's), without its
``environment`` (values the operator's tools do not need) or ``redact`` (code).

This module is what both sides share: the constructs write with :func:`job_output`, the
CLI and the drills read with :meth:`Deployment.from_outputs`. It imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .config import OverlapPolicy
from .definitions import JobDefinition

__all__ = [
    "ALARMS_OFF_PREFIX",
    "ALARM_TOPIC_OUTPUT",
    "DeployedJob",
    "Deployment",
    "DeploymentError",
    "RECOVERY_EXECUTE_OUTPUT",
    "RECOVERY_OUTPUT",
    "TABLE_OUTPUT",
    "definition_fields",
    "definition_from_fields",
    "job_output",
    "job_output_key",
    "pascal",
    "reconciler_output_key",
]

TABLE_OUTPUT = "TableName"
ALARM_TOPIC_OUTPUT = "AlarmTopicArn"
ALARMS_OFF_PREFIX = "off: "
RECOVERY_OUTPUT = "RecoveryFunctionName"
RECOVERY_EXECUTE_OUTPUT = "RecoveryExecuteArn"
FORMAT = 1
"""The version of a job output's JSON (``"v"``)."""

_LEFT_OUT = frozenset({"environment", "redact"})


class DeploymentError(ValueError):
    """A stack's outputs are not what jobguard's constructs write: ``field`` names the
    output."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def pascal(name: str) -> str:
    """A construct id or output key part from a job name: ``crm-sync`` -> ``CrmSync``."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_.]", name) if part)


def job_output_key(job: str) -> str:
    """The output that describes ``job``: ``crm-sync`` -> ``CrmSyncJob``."""
    return f"{pascal(job)}Job"


def reconciler_output_key(job: str) -> str:
    return f"{pascal(job)}ReconcilerFunctionName"


def _timedelta_fields() -> frozenset[str]:
    hints = typing.get_type_hints(JobDefinition)
    return frozenset(name for name, hint in hints.items()
                     if hint is timedelta or timedelta in typing.get_args(hint))


def definition_fields(job: JobDefinition) -> dict[str, Any]:
    """``job``'s fields as JSON values (durations in seconds), without ``environment``
    and ``redact``."""
    durations = _timedelta_fields()
    out: dict[str, Any] = {}
    for item in dataclasses.fields(job):
        if item.name in _LEFT_OUT:
            continue
        value = getattr(job, item.name)
        if item.name in durations and value is not None:
            value = value.total_seconds()
        elif isinstance(value, OverlapPolicy):
            value = value.value
        out[item.name] = value
    return out


def definition_from_fields(fields: Mapping[str, Any], *, where: str = "definition"
                           ) -> JobDefinition:
    """The :class:`JobDefinition` :func:`definition_fields` wrote (fields it does not know
    are ignored: a newer jobguard may add some). Refused with :class:`DeploymentError`
    naming ``where`` when the fields do not make a valid definition."""
    durations = _timedelta_fields()
    known = {item.name for item in dataclasses.fields(JobDefinition)} - _LEFT_OUT
    options: dict[str, Any] = {}
    if not isinstance(fields, Mapping):
        raise DeploymentError(where, f"not a job definition (a JSON object), got "
                              f"{type(fields).__name__}")
    try:
        for name, value in fields.items():
            if name not in known:
                continue
            if name in durations and value is not None:
                value = timedelta(seconds=float(value))
            elif name == "policy":
                value = OverlapPolicy(value)
            options[name] = value
        return JobDefinition(**options)
    except (TypeError, ValueError, ArithmeticError) as exc:  # 1e300 seconds: OverflowError
        raise DeploymentError(where, f"not a job definition ({exc})") from None


def job_output(*, job: JobDefinition, function: Any, queue_url: Any, drills: bool,
               runbook: str | None, fleet: str | None = None) -> dict[str, Any]:
    """The value of a job's output (before the CDK turns its tokens into a JSON string):
    ``function`` and ``queue_url`` may be CDK tokens; ``fleet`` the name of the
    :class:`jobguard.cdk.JobFleet` the job is in (its alarms are the fleet's)."""
    out = {"v": FORMAT, "job": job.name, "function": function, "queue": queue_url,
           "drills": drills, "runbook": runbook, "definition": definition_fields(job)}
    if fleet is not None:
        out["fleet"] = fleet
    return out


@dataclass(frozen=True)
class DeployedJob:
    """One job of a deployed stack, as its output describes it."""

    name: str
    function: str
    queue_url: str | None
    drills: bool
    runbook: str | None
    definition: JobDefinition
    fleet: str | None = None
    """The :class:`jobguard.cdk.JobFleet` the job is in; None: a job with its own alarms."""

    @property
    def policy(self) -> str:
        return self.definition.policy.value


@dataclass(frozen=True)
class Deployment:
    """What the operator's tools read from a stack's outputs."""

    stack: str
    table: str
    alarm_topic: str | None
    """The topic's ARN; None when alarms are off (:attr:`alarms_off_reason` says why)."""
    alarms_off_reason: str | None
    recovery_function: str | None
    recovery_execute: str | None
    jobs: dict[str, DeployedJob]
    reconcilers: dict[str, str]
    outputs: dict[str, str]

    @classmethod
    def from_outputs(cls, stack: str, outputs: Mapping[str, str]) -> Deployment:
        """Read a stack's outputs; a stack that has no ``TableName`` is not one built with
        jobguard's constructs, and a job output that does not parse is named."""
        if TABLE_OUTPUT not in outputs:
            raise DeploymentError(TABLE_OUTPUT, f"stack {stack!r} has no {TABLE_OUTPUT} output: "
                                  "is it a stack built with jobguard.cdk (a JobTable)?")
        topic = outputs.get(ALARM_TOPIC_OUTPUT)
        off: str | None = None
        if topic is not None and topic.startswith(ALARMS_OFF_PREFIX):
            off, topic = topic[len(ALARMS_OFF_PREFIX):], None
        jobs: dict[str, DeployedJob] = {}
        for key, text in outputs.items():
            if not key.endswith("Job") or key == "Job":
                continue
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested deep
                continue  # some other output of the user's that ends in "Job"
            if not isinstance(value, dict) or "definition" not in value or "job" not in value:
                continue
            version = value.get("v")
            if version != FORMAT:  # a newer jobguard's: its fields may mean something else
                raise DeploymentError(key, f"is format {version!r}; this jobguard reads "
                                      f"format {FORMAT}: use the jobguard version that built "
                                      "the stack")
            definition = definition_from_fields(value["definition"], where=key)
            if job_output_key(definition.name) != key or value["job"] != definition.name:
                raise DeploymentError(key, f"describes job {value['job']!r}, not its key's")
            function = value.get("function")
            if not isinstance(function, str) or not function:
                raise DeploymentError(key, "has no function name")
            queue = value.get("queue")
            runbook = value.get("runbook")
            fleet = value.get("fleet")
            if fleet is not None and (not isinstance(fleet, str) or not fleet):
                raise DeploymentError(key, f"fleet: not a fleet's name, got {fleet!r}")
            jobs[definition.name] = DeployedJob(
                name=definition.name, function=function,
                queue_url=queue if isinstance(queue, str) and queue else None,
                drills=value.get("drills") is True,
                runbook=runbook if isinstance(runbook, str) and runbook else None,
                definition=definition, fleet=fleet)
        reconcilers = {name: outputs[reconciler_output_key(name)] for name in jobs
                       if reconciler_output_key(name) in outputs}
        return cls(stack=stack, table=outputs[TABLE_OUTPUT], alarm_topic=topic,
                   alarms_off_reason=off, recovery_function=outputs.get(RECOVERY_OUTPUT),
                   recovery_execute=outputs.get(RECOVERY_EXECUTE_OUTPUT), jobs=jobs,
                   reconcilers=reconcilers, outputs=dict(outputs))
