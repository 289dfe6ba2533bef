"""The stack's settings, read once from CDK context and validated when built.

- ``jobguard:stackName`` (``JobGuard``; ``JobGuard-drills``, ``JobGuard-local``): the
  CloudFormation stack name. A drills or local deployment's name must end in
  ``-drills`` / ``-local``, so that it can never replace a production stack;
- ``jobguard:local`` (``false``): deploying to the local emulator, so host-platform
  dependencies, and schedules created disabled (see :attr:`StackSettings.local`);
- ``jobguard:drills`` (``false``): a deployment for ``jobguard drill``: every job with
  its drill timings (:meth:`jobguard.definitions.JobDefinition.for_drills`) and
  ``JOBGUARD_DRILLS=1`` on every function, so the jobs honour drill fault switches;
- ``jobguard:dependencies`` (``powertools-layer``): or ``wheels``, a pip-built arm64 layer;
- ``jobguard:powertoolsLayerVersion`` (``bundle.POWERTOOLS_LAYER_VERSION``);
- ``jobguard:recoveryInvokers`` (none): IAM role/user ARNs or 12-digit account ids that
  may invoke the recovery function, comma-separated;
- where the alarms go, one of (a production synth without any is refused, naming them;
  a local or drills deployment pages nobody unless told):

  - ``jobguard:alarmTopicArn``: an SNS topic every alarm notifies;
  - ``jobguard:alarmEmail``: addresses, comma-separated, subscribed to the stack's own
    alarm topic (KMS-encrypted, TLS only);
  - ``jobguard:alarmsOff``: the reason nobody is paged (in every alarm's description);
- ``jobguard:runbookUrl`` (none): your runbook, named by every alarm's description
  (else the ``jobguard runbook JOB --stack STACK`` command that prints it);
- ``jobguard:drillsAccounts`` (none): the 12-digit accounts a drills deployment may go
  to, comma-separated. A drills synth (not local) refuses any other account: the account
  comes from ``CDK_DEFAULT_ACCOUNT`` (the CDK CLI sets it from your credentials) and the
  stack is bound to it, so its template cannot be deployed elsewhere either. A local
  deployment goes to the emulator's account (``000000000000``) only.

Every deployment is tagged ``jobguard:deployment`` = ``production``, ``drills`` or
``local``.

Operations (see :class:`OperationsSettings`; each with a safe default):

- ``jobguard:kmsKey`` (``aws-managed``): ``create`` (one customer-managed key, rotated,
  for the table, the queues, the log groups and the alarm topic) or a KMS key ARN;
- ``jobguard:tracing`` (``false``): X-Ray active tracing, runs traced by the Powertools
  Tracer;
- ``jobguard:triggerMaxConcurrency`` (none): the trigger queues' event source mappings'
  maximum concurrency (2-1000);
- ``jobguard:deletionProtection`` / ``jobguard:terminationProtection`` (on, except for
  local and drill deployments): the table's deletion protection, the stack's
  termination protection;
- ``jobguard:logRetentionDays`` (``30``): the functions' log groups.

Example:
    >>> StackSettings.from_context({"jobguard:local": "true"}).dependencies.value
    'host'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from jobguard.cdk import AlarmDestination, alarms_off, alarms_to_email, alarms_to_topic
from jobguard.cdk._context import flag
from jobguard.cdk.bundle import POWERTOOLS_LAYER_VERSION, Dependencies
from jobguard.errors import ConfigError

__all__ = ["ALARM_CONTEXT", "CONTEXT", "DEPLOYMENT_TAG", "LOCAL_ACCOUNT", "LOG_RETENTION",
           "NOBODY_PAGED", "OPERATIONS_CONTEXT", "OperationsSettings", "PRODUCTION_STACK_NAME",
           "StackSettings"]

CONTEXT = {
    "stack_name": "jobguard:stackName",
    "local": "jobguard:local",
    "drills": "jobguard:drills",
    "dependencies": "jobguard:dependencies",
    "powertools_layer_version": "jobguard:powertoolsLayerVersion",
    "recovery_invokers": "jobguard:recoveryInvokers",
    "recovery_planners": "jobguard:recoveryPlanners",
    "alarm_topic_arn": "jobguard:alarmTopicArn",
    "alarm_emails": "jobguard:alarmEmail",
    "alarms_off": "jobguard:alarmsOff",
    "runbook_url": "jobguard:runbookUrl",
    "drills_accounts": "jobguard:drillsAccounts",
}
ALARM_CONTEXT = ("alarm_emails", "alarm_topic_arn", "alarms_off")
NOBODY_PAGED = "a local/drills deployment: nobody is paged"
"""Why a local or drills deployment's alarms are off unless the context says otherwise."""

PRODUCTION_STACK_NAME = "JobGuard"
LOCAL_ACCOUNT = "000000000000"
"""The local emulator's account (MiniStack's, ``jobguard.local.ministack.ACCOUNT``)."""
DEPLOYMENT_TAG = "jobguard:deployment"

_ACCOUNT = re.compile(r"^\d{12}$")
_IAM_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(root|role/[\w+=,.@/-]+|user/[\w+=,.@/-]+)$")
_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]+(\.fifo)?$")
_STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")


# -- operations: alarms' reach, encryption, protection, tracing, retention -----------------

OPERATIONS_CONTEXT = {
    "kms_key": "jobguard:kmsKey",
    "tracing": "jobguard:tracing",
    "trigger_max_concurrency": "jobguard:triggerMaxConcurrency",
    "deletion_protection": "jobguard:deletionProtection",
    "termination_protection": "jobguard:terminationProtection",
    "log_retention_days": "jobguard:logRetentionDays",
}
AWS_MANAGED, CREATE = "aws-managed", "create"
_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$")
LOG_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS, 7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS, 150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS, 545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS, 1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS, 3653: logs.RetentionDays.TEN_YEARS,
}
"""Retention periods CloudWatch Logs accepts (days) that a deployment may choose."""


@dataclass(frozen=True, kw_only=True)
class OperationsSettings:
    """What a production team sets on a deployment beyond the jobs: encryption, tracing,
    concurrency, protection against deletion, log retention. Defaults are safe."""

    kms_key: str = AWS_MANAGED
    """``aws-managed`` (the services' own keys), ``create`` (one customer-managed key,
    rotated, retained), or the ARN of a key whose policy already lets CloudWatch Logs and
    CloudWatch alarms use it."""
    tracing: bool = False
    trigger_max_concurrency: int | None = None
    """Not set by default: a trigger queue is FIFO with one message group (the job), so
    its mapping runs one trigger at a time whatever this says; set it (2-1000) to cap
    the pollers' concurrency explicitly."""
    deletion_protection: bool = True
    termination_protection: bool = True
    log_retention_days: int = 30

    def __post_init__(self) -> None:
        if not (self.kms_key in (AWS_MANAGED, CREATE) or _KEY_ARN.fullmatch(self.kms_key)):
            raise ConfigError("kms_key", f"{self.kms_key!r}: '{AWS_MANAGED}', '{CREATE}' or a "
                              "KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)")
        concurrency = self.trigger_max_concurrency
        if concurrency is not None and (isinstance(concurrency, bool)
                                        or not isinstance(concurrency, int)
                                        or not 2 <= concurrency <= 1000):
            raise ConfigError("trigger_max_concurrency",
                              f"must be an integer 2-1000 (Lambda's range), got {concurrency!r}")
        if self.log_retention_days not in LOG_RETENTION:
            raise ConfigError("log_retention_days", f"{self.log_retention_days!r}: one of "
                              f"{', '.join(map(str, LOG_RETENTION))}")

    @property
    def log_retention(self) -> logs.RetentionDays:
        return LOG_RETENTION[self.log_retention_days]

    @classmethod
    def from_context(cls, get: Callable[[str], Any], *, disposable: bool) -> OperationsSettings:
        """Read ``jobguard:*`` operations context; protections default to off for a
        ``disposable`` (local or drill) deployment, on otherwise."""
        options: dict[str, Any] = {
            "deletion_protection": not disposable, "termination_protection": not disposable}
        if (key := get(OPERATIONS_CONTEXT["kms_key"])) is not None:
            options["kms_key"] = str(key).strip()
        for name in ("tracing", "deletion_protection", "termination_protection"):
            if (value := get(OPERATIONS_CONTEXT[name])) is not None:
                options[name] = flag(value, OPERATIONS_CONTEXT[name])
        for name in ("trigger_max_concurrency", "log_retention_days"):
            if (value := get(OPERATIONS_CONTEXT[name])) is not None:
                try:
                    options[name] = int(value)
                except (TypeError, ValueError):
                    raise ConfigError(OPERATIONS_CONTEXT[name],
                                      f"{value!r} is not an integer") from None
        return cls(**options)

    def key(self, scope: Construct) -> kms.IKey | None:
        """The customer-managed key (created or imported in ``scope``), or None."""
        if self.kms_key == AWS_MANAGED:
            return None
        if self.kms_key == CREATE:
            return _created_key(scope)
        return kms.Key.from_key_arn(scope, "Key", self.kms_key)


def _created_key(scope: Construct) -> kms.IKey:
    key = kms.Key(scope, "Key", enable_key_rotation=True, removal_policy=RemovalPolicy.RETAIN,
                  description="jobguard: the table, queues, log groups and alarm topic")
    # CloudWatch Logs encrypts the functions' log groups with it (this region's service,
    # this account's log groups only)
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="CloudWatchLogsOfThisAccount",
        principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
        actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*",
                 "kms:Describe*"],
        resources=["*"],  # in a key policy, "*" is this key
        conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn":
                                f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"}},
    ))
    return key


@dataclass(frozen=True, kw_only=True)
class StackSettings:
    """What a deployment of :class:`infra.stack.JobGuardStack` may vary."""

    stack_name: str = ""
    """The stack's name; by default ``JobGuard``, ``JobGuard-drills`` or ``JobGuard-local``
    (see :attr:`deployment`)."""
    dependencies: Dependencies = Dependencies.POWERTOOLS_LAYER
    """Where the functions' third-party packages come from (host wheels when local)."""
    powertools_layer_version: int = POWERTOOLS_LAYER_VERSION
    recovery_invokers: tuple[str, ...] = field(default_factory=tuple)
    """Role/user ARNs or 12-digit account ids that may plan and execute recoveries (invoke
    the recovery function and its ``execute`` alias)."""
    recovery_planners: tuple[str, ...] = field(default_factory=tuple)
    """Role/user ARNs or 12-digit account ids that may only plan recoveries (invoke the
    recovery function itself, not its ``execute`` alias)."""
    alarm_topic_arn: str | None = None
    alarm_emails: tuple[str, ...] = field(default_factory=tuple)
    alarms_off: str | None = None
    """Why nobody is paged (``jobguard:alarmsOff``)."""
    runbook_url: str | None = None
    local: bool = False
    """Deploying to the local emulator: host-platform dependencies, and every
    EventBridge Scheduler schedule created DISABLED. MiniStack fires schedules but leaves
    ``<aws.scheduler.scheduled-time>`` literal, which jobguard rightly refuses as a tick;
    locally ``jobguard drill`` delivers the ticks itself, with the time filled in."""
    drills: bool = False
    """Deploy for ``jobguard drill``: drill timings, ``JOBGUARD_DRILLS=1`` everywhere, and
    schedules created disabled (the drills deliver every tick themselves).
    Never for a production deployment: the fault switches then become live."""
    operations: OperationsSettings = field(default_factory=OperationsSettings)
    """Encryption, tracing, concurrency, protection, retention (:class:`OperationsSettings`)."""
    drills_accounts: tuple[str, ...] = field(default_factory=tuple)
    """The accounts a drills deployment may go to (``jobguard:drillsAccounts``)."""
    account: str | None = None
    """The account being deployed to, when known (``CDK_DEFAULT_ACCOUNT``)."""

    @property
    def deployment(self) -> str:
        """``local`` (the emulator, drills or not), ``drills`` (a test account) or
        ``production``: the stack's name suffix and its ``jobguard:deployment`` tag."""
        return "local" if self.local else "drills" if self.drills else "production"

    def __post_init__(self) -> None:
        suffix = "" if self.deployment == "production" else f"-{self.deployment}"
        if not self.stack_name:
            object.__setattr__(self, "stack_name", PRODUCTION_STACK_NAME + suffix)
        if suffix and not self.stack_name.endswith(suffix):
            raise ConfigError("stack_name", f"{self.stack_name!r}: a {self.deployment} "
                              f"deployment's stack name must end in {suffix!r}, so that it "
                              "never replaces a production stack")
        for account in (*self.drills_accounts, *([self.account] if self.account else [])):
            if not _ACCOUNT.fullmatch(account):
                raise ConfigError("drills_accounts" if account != self.account else "account",
                                  f"{account!r} is not a 12-digit account id")
        if self.local and self.account not in (None, LOCAL_ACCOUNT):
            raise ConfigError("account", f"a local deployment goes to the emulator's account "
                              f"{LOCAL_ACCOUNT}, not {self.account}")
        if self.drills and not self.local and self.account not in self.drills_accounts:
            raise ConfigError(
                "drills_accounts",
                f"a drills deployment turns on fault switches and disables schedules: "
                f"account {self.account or '(unknown: no CDK_DEFAULT_ACCOUNT)'} is not on "
                f"the drills allow-list {list(self.drills_accounts)} "
                f"(-c {CONTEXT['drills_accounts']}=<account>,...)")
        if not _STACK_NAME.fullmatch(self.stack_name):
            raise ConfigError("stack_name", f"{self.stack_name!r} is not a stack name")
        object.__setattr__(self, "dependencies", _enum(self.dependencies))
        if self.local and self.dependencies is not Dependencies.HOST:
            raise ConfigError("dependencies", f"{self.dependencies.value!r} contradicts "
                              "local=True (the local emulator runs host wheels)")
        if (isinstance(self.powertools_layer_version, bool)
                or not isinstance(self.powertools_layer_version, int)
                or self.powertools_layer_version < 1):
            raise ConfigError("powertools_layer_version",
                              f"must be an integer >= 1, got {self.powertools_layer_version!r}")
        for field_name in ("recovery_invokers", "recovery_planners"):
            for invoker in getattr(self, field_name):
                if invoker == "*" or not (_ACCOUNT.fullmatch(invoker)
                                          or _IAM_ARN.fullmatch(invoker)):
                    raise ConfigError(
                        field_name,
                        f"{invoker!r}: name an IAM role or user ARN, or a 12-digit account "
                        "id; recovery is never public")
        if self.alarm_topic_arn is not None and not _TOPIC_ARN.fullmatch(self.alarm_topic_arn):
            raise ConfigError("alarm_topic_arn", f"{self.alarm_topic_arn!r} is not an SNS ARN")
        given = [CONTEXT[name] for name in ALARM_CONTEXT if getattr(self, name)]
        if len(given) > 1:
            raise ConfigError("alarms", f"{' and '.join(given)}: choose one alarm destination")
        self._destination()  # addresses, reason and runbook link checked when defined

    def _destination(self) -> AlarmDestination | None:
        runbook = self.runbook_url
        if self.alarm_topic_arn:
            return None  # imported in the stack (alarm_destination)
        if self.alarm_emails:
            return alarms_to_email(*self.alarm_emails, runbook=runbook)
        if self.alarms_off is not None:
            return alarms_off(reason=self.alarms_off, runbook=runbook)
        if self.deployment != "production":
            return alarms_off(reason=NOBODY_PAGED, runbook=runbook)
        return None

    def alarm_destination(self, scope: Construct, key: kms.IKey | None = None
                          ) -> AlarmDestination:
        """Where the stack's alarms go (its e-mail topic encrypted with ``key``); a
        production deployment without a destination is refused, naming the context."""
        if self.alarm_topic_arn:
            return alarms_to_topic(sns.Topic.from_topic_arn(scope, "AlarmTopic",
                                                            self.alarm_topic_arn),
                                   runbook=self.runbook_url)
        if self.alarm_emails:
            return alarms_to_email(*self.alarm_emails, runbook=self.runbook_url, key=key)
        destination = self._destination()
        if destination is None:
            raise ConfigError("alarms", "a production deployment needs an alarm destination: "
                              f"-c {CONTEXT['alarm_emails']}=oncall@example.com, "
                              f"-c {CONTEXT['alarm_topic_arn']}=<SNS topic ARN> or "
                              f"-c {CONTEXT['alarms_off']}=<why nobody is paged>")
        return destination

    @classmethod
    def from_context(cls, context: Mapping[str, Any] | Callable[[str], Any], *,
                     account: str | None = None) -> StackSettings:
        """Read ``jobguard:*`` context (a mapping, or ``node.try_get_context``);
        ``account`` is the one being deployed to, when known."""
        get = context if callable(context) else context.get
        options: dict[str, Any] = {"account": account or None}
        if (name := get(CONTEXT["stack_name"])) is not None:
            options["stack_name"] = str(name)
        dependencies = get(CONTEXT["dependencies"])
        if flag(get(CONTEXT["local"]), CONTEXT["local"]):
            if dependencies not in (None, Dependencies.HOST.value):
                raise ConfigError(CONTEXT["dependencies"], f"{dependencies!r} contradicts "
                                  f"{CONTEXT['local']}=true (local uses host wheels)")
            dependencies = Dependencies.HOST.value
            options["local"] = True
        options["drills"] = flag(get(CONTEXT["drills"]), CONTEXT["drills"])
        if dependencies is not None:
            options["dependencies"] = dependencies
        if (version := get(CONTEXT["powertools_layer_version"])) is not None:
            try:
                options["powertools_layer_version"] = int(version)
            except (TypeError, ValueError):
                raise ConfigError(CONTEXT["powertools_layer_version"],
                                  f"{version!r} is not a layer version") from None
        options["recovery_invokers"] = _list(get(CONTEXT["recovery_invokers"]))
        options["recovery_planners"] = _list(get(CONTEXT["recovery_planners"]))
        if topic := get(CONTEXT["alarm_topic_arn"]):
            options["alarm_topic_arn"] = str(topic)
        options["alarm_emails"] = _list(get(CONTEXT["alarm_emails"]))
        if (off := get(CONTEXT["alarms_off"])) is not None:
            options["alarms_off"] = str(off)
        if (runbook := get(CONTEXT["runbook_url"])) is not None:
            options["runbook_url"] = str(runbook)
        options["operations"] = OperationsSettings.from_context(
            get, disposable=bool(options.get("local") or options["drills"]))
        options["drills_accounts"] = _list(get(CONTEXT["drills_accounts"]))
        try:
            return cls(**options)
        except ConfigError as exc:  # name the context key the user sets
            keys = {"drills_accounts": CONTEXT["drills_accounts"],
                    "reason": CONTEXT["alarms_off"], "runbook": CONTEXT["runbook_url"]}
            if exc.field in keys or (exc.field == "alarms" and options["alarm_emails"]
                                     and "e-mail" in str(exc)):
                key = keys.get(exc.field, CONTEXT["alarm_emails"])
                raise ConfigError(key, str(exc).split(": ", 1)[-1]) from None
            raise

    def invoker_principals(self) -> list[iam.IPrincipal]:
        """Who may plan and execute recoveries."""
        return _principals(self.recovery_invokers)

    def planner_principals(self) -> list[iam.IPrincipal]:
        """Who may only plan recoveries."""
        return _principals(self.recovery_planners)


def _principals(names: tuple[str, ...]) -> list[iam.IPrincipal]:
    return [iam.AccountPrincipal(i) if _ACCOUNT.fullmatch(i) else iam.ArnPrincipal(i)
            for i in names]


def _enum(value: Any) -> Dependencies:
    try:
        return Dependencies(value)
    except ValueError:
        names = ", ".join(d.value for d in Dependencies)
        raise ConfigError("dependencies", f"{value!r}: one of {names}") from None


def _list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())
