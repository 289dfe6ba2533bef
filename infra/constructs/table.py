"""The jobguard table: leases, run records, the item ledger and checkpoints.

The layout comes from :mod:`jobguard.schema` (the same constants the store and the local
emulator use), so the deployed table cannot drift from what the code expects.

Example:
    >>> table = JobTable(stack, "Table")  # doctest: +SKIP
    >>> table.grant_job_access(function)  # doctest: +SKIP
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from jobguard.schema import (
    PARTITION_KEY,
    SORT_KEY,
    TTL_ATTRIBUTE,
    UNRESOLVED_INDEX,
    UNRESOLVED_PK,
    UNRESOLVED_SK,
)

__all__ = ["INDEX_ACTIONS", "TABLE_ACTIONS", "JobTable"]

TABLE_ACTIONS = (
    "dynamodb:BatchGetItem",        # the item ledger: a page's claims in one read
    "dynamodb:ConditionCheckItem",  # the fence check inside claim/settle transactions
    "dynamodb:GetItem",             # lease row, run record, item, checkpoint
    "dynamodb:PutItem",             # run records (also inside release transactions)
    "dynamodb:Query",               # a job's run records
    "dynamodb:UpdateItem",          # acquire, renew, release, decisions, claims, outcomes
)
"""What a jobguard function does to the table, and nothing else. TransactWriteItems is
not an IAM action: a transaction is authorized by the Put/Update/ConditionCheck
permissions of its parts."""

INDEX_ACTIONS = ("dynamodb:Query",)
"""The sparse ``unresolved`` index: a job's claimed, failed and uncertain items."""


class JobTable(Construct):
    """One DynamoDB table for every job of a stack.

    On-demand billing, point-in-time recovery, server-side encryption with the AWS
    managed key (or ``encryption_key``), TTL on ``ttl_epoch_s``, the keys-only sparse
    index ``unresolved``, and kept when the stack is deleted; ``deletion_protection``
    refuses a DeleteTable call too (the stack turns it on in production).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        encryption_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        deletion_protection: bool = False,
    ) -> None:
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
        self.table.add_global_secondary_index(
            index_name=UNRESOLVED_INDEX,
            partition_key=dynamodb.Attribute(name=UNRESOLVED_PK, type=string),
            sort_key=dynamodb.Attribute(name=UNRESOLVED_SK, type=string),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )

    @property
    def table_name(self) -> str:
        return self.table.table_name

    @property
    def index_arn(self) -> str:
        return f"{self.table.table_arn}/index/{UNRESOLVED_INDEX}"

    def grant_job_access(self, grantee: iam.IGrantable) -> None:
        """Exactly what jobguard's stores do: :data:`TABLE_ACTIONS` on the table,
        :data:`INDEX_ACTIONS` on the ``unresolved`` index (and the key, if one is used)."""
        iam.Grant.add_to_principal(grantee=grantee, actions=list(TABLE_ACTIONS),
                                   resource_arns=[self.table.table_arn])
        iam.Grant.add_to_principal(grantee=grantee, actions=list(INDEX_ACTIONS),
                                   resource_arns=[self.index_arn])
        if self.encryption_key is not None:
            self.encryption_key.grant_encrypt_decrypt(grantee)
