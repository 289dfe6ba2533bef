"""crm-sync's own data: the CRM change feed it reads and the notes table it writes.

This is the example job's business data, not jobguard's: a real deployment points its
job at its CRM instead. The variable names come from ``handlers.crm_sync`` (the ones the
job reads), so they cannot drift; each function gets only what its part of the job does.

- the job and recovery read the feed (``Query``: the handler's own ``select``), write
  notes and look them up to reconcile (the actions of jobguard's
  :class:`~jobguard.destinations.DynamoDBDestination` call sites);
- the reconciler only looks notes up.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from handlers import crm_sync
from jobguard.cdk._lint import acknowledge
from jobguard.destinations import DYNAMODB_PUT, DYNAMODB_RECONCILE

__all__ = ["FEED_ACTIONS", "NOTES_RECONCILE_ACTIONS", "NOTES_WRITE_ACTIONS", "CrmSyncData"]

FEED_ACTIONS = ("dynamodb:Query",)
"""``CrmSync.select``: the handler's own query of the change feed (not a jobguard call)."""
NOTES_WRITE_ACTIONS = DYNAMODB_PUT.iam_actions()
NOTES_RECONCILE_ACTIONS = DYNAMODB_RECONCILE.iam_actions()


class CrmSyncData(Construct):
    """The change feed (``pk``/``seq``) and the notes table (``work_id``), both kept when
    the stack is deleted."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.feed = self._table("ContactChanges", "pk", "seq")
        self.notes = self._table("Notes", "work_id")

    def _table(self, construct_id: str, partition: str, sort: str | None = None
               ) -> dynamodb.Table:
        string = dynamodb.AttributeType.STRING
        table = dynamodb.Table(
            self, construct_id,
            partition_key=dynamodb.Attribute(name=partition, type=string),
            sort_key=dynamodb.Attribute(name=sort, type=string) if sort else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(table, "CKV_AWS_119",
                    "the example job's own data, encrypted with the AWS managed key; a real "
                    "deployment points the job at its CRM instead")
        return table

    def wire(self, *, runs: Sequence[lambda_.Function],
             reconciles: Sequence[lambda_.Function]) -> None:
        """``runs`` select and process (the job, recovery); ``reconciles`` only look up."""
        for function in runs:
            function.add_environment(crm_sync.CONTACTS_TABLE, self.feed.table_name)
            function.add_environment(crm_sync.NOTES_TABLE, self.notes.table_name)
            _allow(function, FEED_ACTIONS, self.feed)
            _allow(function, NOTES_WRITE_ACTIONS + NOTES_RECONCILE_ACTIONS, self.notes)
        for function in reconciles:
            function.add_environment(crm_sync.NOTES_TABLE, self.notes.table_name)
            _allow(function, NOTES_RECONCILE_ACTIONS, self.notes)


def _allow(function: lambda_.Function, actions: Sequence[str], table: dynamodb.Table) -> None:
    function.add_to_role_policy(iam.PolicyStatement(actions=list(actions),
                                                    resources=[table.table_arn]))
