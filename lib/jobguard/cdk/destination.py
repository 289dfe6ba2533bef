"""Where a stack's alarms go: a person, a topic, or nowhere, said in writing.

Every construct that makes alarms (:class:`JobTable`, :class:`GuardedJob`,
:class:`Reconciler`, :class:`RecoveryFunction`) requires ``alarms=``, one of:

- :func:`alarms_to_email`: one encrypted alarm topic per stack
  (:class:`jobguard.cdk.alarm_topic.AlarmTopic`, made on first use), each address
  subscribed (each must confirm the subscription e-mail AWS sends);
- :func:`alarms_to_topic`: a topic you own (an ``sns.ITopic``);
- :func:`alarms_off`: no alarm actions, with the reason in every alarm's description and
  in the stack's ``AlarmTopicArn`` output (``off: <reason>``).

Every alarm notifies the destination when it fires and when it is OK again, and its
description ends with ``Runbook: <runbook>`` (your link) or, without one, the command
that prints the job's runbook: ``jobguard runbook <job> --stack <stack>``.

Example:
    >>> alarms = alarms_to_email("oncall@example.com", runbook="https://wiki/jobs")
    >>> GuardedJob(self, "Mailer", job=MAILER, table=table, bundle=code, alarms=alarms)
    ... # doctest: +SKIP
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from jobguard.deployment import ALARM_TOPIC_OUTPUT, ALARMS_OFF_PREFIX
from jobguard.errors import ConfigError

from ._context import local_deployment

__all__ = ["ALARMS_OPTION", "AlarmDestination", "BoundAlarms", "TOPIC_ID", "alarms_off",
           "alarms_to_email", "alarms_to_topic", "require"]

ALARMS_OPTION = "alarms"
TOPIC_ID = "JobGuardAlarms"
"""The construct id of the stack's alarm topic (e-mail destinations)."""
_STACK_MARK = "JobGuardAlarmDestination"
_EMAIL = re.compile(r"^[^@\s,;<>]+@[^@\s,;<>]+\.[A-Za-z]{2,}$")
_WORD = re.compile(r"[A-Za-z]{2,}")
MAX_REASON = 120
MAX_RUNBOOK = 200
"""With the longest runbook words (630 characters), a description that names both stays
within CloudWatch's 1024 characters (runbook_alarm checks each)."""
_HOW = ('pass alarms=alarms_to_email("oncall@example.com"), alarms_to_topic(topic) or '
        'alarms_off(reason="...")')


@dataclass(frozen=True, eq=False)
class AlarmDestination:
    """Where alarms go; made by :func:`alarms_to_email`, :func:`alarms_to_topic` or
    :func:`alarms_off`. One stack uses one destination."""

    addresses: tuple[str, ...] = ()
    topic: sns.ITopic | None = None
    off_reason: str | None = None
    runbook: str | None = None
    key: kms.IKey | None = None

    @property
    def off(self) -> bool:
        return self.off_reason is not None

    def bind(self, scope: Construct, *, job: str | None = None) -> BoundAlarms:
        """This destination for the alarms ``scope`` makes (of ``job``, or of the whole
        stack): the stack's topic and ``AlarmTopicArn`` output are made on first use."""
        stack = Stack.of(scope)
        topic = self._topic(stack)  # the output too, when alarms are off
        action = None if topic is None else cw_actions.SnsAction(topic)
        if self.runbook is not None:
            reference = f"Runbook: {self.runbook}"
        elif job is not None:
            reference = f"Runbook: jobguard runbook {job} --stack {stack.stack_name}"
        else:
            reference = (f"Runbook: jobguard runbook JOB --stack {stack.stack_name} "
                         "(each job of the stack)")
        if self.off:
            reference = f"Alarms are off, nobody is paged: {self.off_reason}. {reference}"
        return BoundAlarms(action=action, reference=reference)

    def _topic(self, stack: Stack) -> sns.ITopic | None:
        mark = stack.node.try_find_child(_STACK_MARK)
        if mark is None:
            mark = _Mark(stack, _STACK_MARK, self)
        elif not isinstance(mark, _Mark) or mark.destination is not self:
            raise ConfigError(ALARMS_OPTION, f"stack {stack.stack_name!r} already sends its "
                              "alarms to another destination: make one alarms=... and pass "
                              "it to every construct of the stack")
        return mark.topic


class _Mark(Construct):
    """The stack's destination, its topic (made here for e-mail) and its output."""

    def __init__(self, stack: Stack, construct_id: str, destination: AlarmDestination) -> None:
        super().__init__(stack, construct_id)
        self.destination = destination
        if destination.off:
            self.topic: sns.ITopic | None = None
            value = f"{ALARMS_OFF_PREFIX}{destination.off_reason}"
        elif destination.topic is not None:
            self.topic = destination.topic
            value = self.topic.topic_arn
        else:
            from .alarm_topic import AlarmTopic

            made = AlarmTopic(stack, TOPIC_ID, key=destination.key)
            if not local_deployment(stack):  # a local AWS pages nobody
                for address in destination.addresses:
                    made.topic.add_subscription(subscriptions.EmailSubscription(address))
            self.topic = made.topic
            value = self.topic.topic_arn
        CfnOutput(stack, ALARM_TOPIC_OUTPUT, value=value,
                  description="where this stack's jobguard alarms go (off: why they do not)")


@dataclass(frozen=True)
class BoundAlarms:
    """A destination as one construct's alarms use it."""

    action: cloudwatch.IAlarmAction | None
    reference: str
    """The description's last sentence: ``Runbook: ...`` (after why alarms are off)."""

    def apply(self, alarm: cloudwatch.Alarm) -> None:
        if self.action is not None:
            alarm.add_alarm_action(self.action)
            alarm.add_ok_action(self.action)  # the person paged learns that it is over


def _runbook(runbook: str | None) -> str | None:
    if runbook is None:
        return None
    if not isinstance(runbook, str) or not runbook.strip() or not runbook.isprintable() \
            or len(runbook) > MAX_RUNBOOK:
        raise ConfigError("runbook", f"a link (one line, at most {MAX_RUNBOOK} characters) "
                          f"to your runbook, got {runbook!r}")
    return runbook.strip()


def alarms_to_email(*addresses: str, runbook: str | None = None,
                    key: kms.IKey | None = None) -> AlarmDestination:
    """Alarms (and their OK) e-mailed to ``addresses`` through the stack's encrypted
    alarm topic (encrypted with ``key`` when given, else a key made for it)."""
    if not addresses:
        raise ConfigError(ALARMS_OPTION, "alarms_to_email needs at least one address")
    seen: set[str] = set()
    for address in addresses:
        if not isinstance(address, str) or not _EMAIL.fullmatch(address.strip()) \
                or not address.isprintable():
            raise ConfigError(ALARMS_OPTION, f"{address!r} is not an e-mail address")
        if address.strip().lower() in seen:  # one subscription each: a second is refused
            raise ConfigError(ALARMS_OPTION, f"{address.strip()!r} is given twice")
        seen.add(address.strip().lower())
    return AlarmDestination(addresses=tuple(a.strip() for a in addresses),
                            runbook=_runbook(runbook), key=key)


def alarms_to_topic(topic: sns.ITopic, runbook: str | None = None) -> AlarmDestination:
    """Alarms (and their OK) published to ``topic``, which you own and subscribe to."""
    if not hasattr(topic, "topic_arn"):
        raise ConfigError(ALARMS_OPTION, f"alarms_to_topic takes an SNS topic (sns.ITopic), "
                          f"got {topic!r}")
    return AlarmDestination(topic=topic, runbook=_runbook(runbook))


def alarms_off(*, reason: str, runbook: str | None = None) -> AlarmDestination:
    """No alarm notifies anyone; ``reason`` (words) is in every alarm's description and
    in the ``AlarmTopicArn`` output."""
    if not isinstance(reason, str) or not _WORD.search(reason) or not reason.isprintable() \
            or len(reason.strip()) > MAX_REASON:
        raise ConfigError("reason", f"alarms_off needs the reason nobody is paged, in words "
                          f"(one line, at most {MAX_REASON} characters), got {reason!r}")
    return AlarmDestination(off_reason=reason.strip(), runbook=_runbook(runbook))


def require(alarms: object, owner: str) -> AlarmDestination:
    """``alarms`` as given to the construct ``owner`` (e.g. ``GuardedJob 'Mailer'``);
    refused, naming the option, when there is none."""
    if alarms is None:
        raise ConfigError(ALARMS_OPTION, f"{owner} has no alarm destination: {_HOW}")
    if not isinstance(alarms, AlarmDestination):
        raise ConfigError(ALARMS_OPTION, f"{owner}: {alarms!r} is not an alarm destination: "
                          f"{_HOW}")
    return alarms
