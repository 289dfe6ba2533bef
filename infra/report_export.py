"""report-export's own data: the bucket it writes one CSV object per period to.

This is the example job's business data, not jobguard's: a real deployment points its
job at its own bucket instead. The variable name and the key prefix come from
``handlers.report_export`` (what the job reads), so they cannot drift.

The job's function gets exactly what :class:`jobguard.destinations.S3Destination`'s call
sites need: ``PutObject`` (the conditional create) and ``GetObject`` (which authorizes
``HeadObject``, the lookup that reconciles) on the job's prefix only, and ``ListBucket``
on the bucket for keys under that prefix only (``s3:prefix``), without which S3 answers
a lookup of a missing object with 403 instead of 404, and an export whose request never
reached S3 could not be told from one whose response was lost. (Deciding 403 or 404 for a
missing object, S3 evaluates ``ListBucket`` with the object's key as ``s3:prefix``.)
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Acknowledgment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from handlers import report_export
from jobguard.cdk._lint import acknowledge
from jobguard.destinations import S3_HEAD, S3_PUT

__all__ = ["BUCKET_ACTIONS", "OBJECT_ACTIONS", "ReportExportData"]

_CALLS = sorted({*S3_PUT.iam_actions(), *S3_HEAD.iam_actions()})
BUCKET_ACTIONS = tuple(a for a in _CALLS if a == "s3:ListBucket")
"""On the bucket, for keys under the prefix: a lookup of a missing object answers 404
(not found), not 403."""
OBJECT_ACTIONS = tuple(a for a in _CALLS if a not in BUCKET_ACTIONS)
"""On ``<bucket>/reports/*``: the conditional put and the HeadObject lookup."""


class ReportExportData(Construct):
    """The reports bucket: versioned (an overwrite would leave a second version, so
    the version count is the count of exports), encrypted (SSE-S3), TLS only, public
    access blocked, kept when the stack is deleted."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self, "Bucket",
            versioned=True,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        no_access_logs = (
            "The example job's reports bucket has no server access logs: it is written only "
            "by the report-export function, whose every write is a work item in the jobguard "
            "ledger and a run record (who, when, which version). Point it at your access-log "
            "bucket in a real deployment.")
        Validations.of(self.bucket).acknowledge(Acknowledgment(
            id="AwsSolutions-S1", reason=no_access_logs))
        acknowledge(self.bucket, "CKV_AWS_18", no_access_logs)

    def wire(self, *, runs: Sequence[lambda_.Function]) -> None:
        """``runs`` export (the job's function)."""
        objects = self.bucket.arn_for_objects(f"{report_export.PREFIX}*")
        stack = Stack.of(self)
        bucket_id = stack.resolve(stack.get_logical_id(
            self.bucket.node.default_child))  # type: ignore[arg-type]
        finding = f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{report_export.PREFIX}*]"
        for function in runs:
            function.add_environment(report_export.BUCKET, self.bucket.bucket_name)
            function.add_to_role_policy(iam.PolicyStatement(
                actions=list(OBJECT_ACTIONS), resources=[objects]))
            function.add_to_role_policy(iam.PolicyStatement(
                actions=list(BUCKET_ACTIONS), resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{report_export.PREFIX}*"]}}))
            if function.role is not None:
                Validations.of(function.role).acknowledge(Acknowledgment(
                    id=finding,
                    reason="report-export writes one object per reporting period, whose "
                           f"key is not known in advance: the grant covers the job's "
                           f"prefix ({report_export.PREFIX}*) of its own bucket, and "
                           "only GetObject and PutObject.",
                ))
