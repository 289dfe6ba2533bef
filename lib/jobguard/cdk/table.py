"""The jobguard table: leases, run records, the item ledger and checkpoints.

The layout comes from :mod:`jobguard.schema` (the same constants the store and the local
emulator use), so the deployed table cannot drift from what the code expects.

It adds the stack output ``TableName`` (what ``jobguard --stack`` reads) and alarms on
the table's throttled reads and writes, sent to ``alarms``.

Example:
    >>> table = JobTable(stack, "Table", alarms=alarms)  # doctest: +SKIP
    >>> table.grant_paths(function, jobs=["crm-sync"], paths=[Path.RUN])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from jobguard.callsites import Path, Target, required_actions
from jobguard.deployment import TABLE_OUTPUT
from jobguard.errors import ConfigError
from jobguard.schema import (
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    UNRESOLVED_INDEX,
    UNRESOLVED_PK,
    UNRESOLVED_SK,
    item_pk,
    job_pk,
    unresolved_pk,
)

from ._lint import acknowledge
from .alarms import table_throttle_alarms
from .destination import AlarmDestination, require

__all__ = ["JobTable", "index_leading_keys", "leading_keys"]


def leading_keys(jobs: Iterable[str]) -> list[str]:
    """The partition keys a function of ``jobs`` may touch (``dynamodb:LeadingKeys``):
    each job's own rows (``JOB#<job>``: lease, fence mark, triggers, runs, checkpoint)
    and its work items (``ITEM#<job>#*``). A job name holds no ``#``, ``*`` or ``?``,
    so one job's pattern never matches another's keys."""
    return sorted({key for job in jobs for key in (job_pk(job), item_pk(job, "*"))})


def index_leading_keys(jobs: Iterable[str]) -> list[str]:
    """The ``unresolved`` index partitions a function of ``jobs`` may query
    (``dynamodb:LeadingKeys`` on the index): each job's own shards
    (``UNRESOLVED#<job>#*``), never another job's failed work ids."""
    return sorted({unresolved_pk(job, "*") for job in jobs})


def _scoped(keys: list[str]) -> dict[str, dict[str, object]]:
    """The condition that limits a grant to partition keys matching ``keys``: every key
    the request names matches one (``ForAllValues``), and it names one (``Null``:
    ``ForAllValues`` alone holds for a request that carries no key at all)."""
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": keys},
            "Null": {"dynamodb:LeadingKeys": "false"}}


class JobTable(Construct):
    """One DynamoDB table for every job of a stack.

    On-demand billing, point-in-time recovery, server-side encryption with the AWS
    managed key (or ``encryption_key``), TTL on ``ttl_epoch_s``, the keys-only sparse
    index ``unresolved``, and kept when the stack is deleted; ``deletion_protection``
    refuses a DeleteTable call too (the stack turns it on in production).

    Args:
        alarms: where its alarms go (required: :func:`jobguard.cdk.alarms_to_email`,
            :func:`~jobguard.cdk.alarms_to_topic` or :func:`~jobguard.cdk.alarms_off`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alarms: AlarmDestination | None = None,
        encryption_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        deletion_protection: bool = False,
    ) -> None:
        self.destination = require(alarms, f"JobTable {construct_id!r}")
        stack = Stack.of(scope)
        if stack.node.try_find_child(TABLE_OUTPUT) is not None:
            raise ConfigError("JobTable", f"stack {stack.stack_name!r} has a JobTable already: "
                              "one table serves every job of a stack")
        super().__init__(scope, construct_id)
        self.encryption_key = encryption_key
        string = dynamodb.AttributeType.STRING
        self.table = dynamodb.Table(
            self, "Table",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=string),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=string),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            encryption=(dynamodb.TableEncryption.CUSTOMER_MANAGED if encryption_key
                        else dynamodb.TableEncryption.AWS_MANAGED),
            encryption_key=encryption_key,
            time_to_live_attribute=TTL_ATTRIBUTE,
            removal_policy=removal_policy,
            deletion_protection=deletion_protection or None,
        )
        if encryption_key is None:
            acknowledge(self.table, "CKV_AWS_119",
                        "encrypted at rest with the AWS managed key; pass encryption_key for a "
                        "customer managed one")
        self.table.add_global_secondary_index(
            index_name=UNRESOLVED_INDEX,
            partition_key=dynamodb.Attribute(name=UNRESOLVED_PK, type=string),
            sort_key=dynamodb.Attribute(name=UNRESOLVED_SK, type=string),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        self.alarms: dict[str, cloudwatch.Alarm] = table_throttle_alarms(
            self, self.table, action=self.destination.bind(self))
        CfnOutput(stack, TABLE_OUTPUT, value=self.table.table_name,
                  description="the jobguard table (jobguard --stack reads it)")

    @property
    def table_name(self) -> str:
        return self.table.table_name

    @property
    def index_arn(self) -> str:
        return f"{self.table.table_arn}/index/{UNRESOLVED_INDEX}"

    def grant_drill_switches(self, grantee: iam.IGrantable, *, jobs: Iterable[str]) -> None:
        """Drill deployments only: the Query that reads a job's drill switch rows."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["dynamodb:Query"], resource_arns=[self.table.table_arn],
            conditions={"ForAllValues:StringLike": {
                "dynamodb:LeadingKeys": [f"JOB#{job}" for job in jobs]}})

    def grant_paths(self, grantee: iam.IGrantable, *, jobs: Iterable[str],
                    paths: Iterable[Path]) -> None:
        """What the code paths ``paths`` of ``jobs`` call, derived from the call sites
        (:func:`jobguard.callsites.required_actions`): the table's actions on the table,
        each key scoped to the jobs' own partitions (:func:`leading_keys`); the index's
        on the ``unresolved`` index, scoped to the jobs' own index partitions
        (:func:`index_leading_keys`), and the key, if one is used.

        On a ``Query``, ``dynamodb:LeadingKeys`` is the partition key value of the key
        condition: on an index, the index's own partition key (the only one the request
        names; DynamoDB's fine-grained access control guide scopes a table and its index
        with one ``LeadingKeys`` condition). So a job's role lists its own failed and
        uncertain work ids, never another job's. The index statement also requires the
        key to be present (``Null``), so that it can never hold vacuously: a query that
        named no leading key would be refused, not let through.
        """
        wanted = frozenset(paths)
        table_actions = required_actions(wanted, Target.TABLE)
        if table_actions:
            iam.Grant.add_to_principal(
                grantee=grantee, actions=list(table_actions),
                resource_arns=[self.table.table_arn],
                conditions={"ForAllValues:StringLike": {
                    "dynamodb:LeadingKeys": leading_keys(jobs)}})
        index_actions = required_actions(wanted, Target.INDEX)
        if index_actions:
            iam.Grant.add_to_principal(grantee=grantee, actions=list(index_actions),
                                       resource_arns=[self.index_arn],
                                       conditions=_scoped(index_leading_keys(jobs)))
        if self.encryption_key is not None:
            self.encryption_key.grant_encrypt_decrypt(grantee)
