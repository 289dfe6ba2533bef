"""A billing team's CDK app with two guarded jobs, built from the installed wheel (the
e2e test, tests/ship/test_own_stack.py, deploys it into the local AWS and drills it).

``python app.py`` synthesizes; ``-c drills=true`` (or DRILLS=1) builds it drillable:
one option, ``LambdaBundle(drills=True)``; ``-c jobguard:local=true`` for the local AWS.
"""
import os

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from billing.jobs import INVOICE_MAILER, JOBS, STATEMENT_EXPORT
from cdk_nag import AwsSolutionsChecks

from jobguard.cdk import GuardedJob, JobTable, LambdaBundle, RecoveryFunction, alarms_to_email


class BillingStack(cdk.Stack):
    def __init__(self, scope, construct_id, *, drills=False, **kwargs):
        super().__init__(scope, construct_id, **kwargs)
        alarms = alarms_to_email("oncall@example.com",
                                 runbook="https://wiki.example.com/billing/jobs")
        table = JobTable(self, "Jobs", alarms=alarms)
        code = LambdaBundle(self, "Code", packages=["billing"], drills=drills)
        guarded = {job.name: GuardedJob(self, name, job=job, table=table, bundle=code,
                                        alarms=alarms)
                   for name, job in (("InvoiceMailer", INVOICE_MAILER),
                                     ("StatementExport", STATEMENT_EXPORT))}
        RecoveryFunction(self, "Recovery", jobs=JOBS, table=table, bundle=code, alarms=alarms,
                         invokers=[iam.AccountRootPrincipal()])
        for job, variable in ((INVOICE_MAILER, "SENT_TABLE"),
                              (STATEMENT_EXPORT, "STATEMENTS_TABLE")):
            out = dynamodb.TableV2(
                self, f"{variable.title().replace('_', '')}",
                table_name=job.environment[variable],
                partition_key=dynamodb.Attribute(name="work_id",
                                                 type=dynamodb.AttributeType.STRING),
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True))
            guarded[job.name].function.add_to_role_policy(iam.PolicyStatement(
                actions=["dynamodb:PutItem", "dynamodb:GetItem"], resources=[out.table_arn]))


app = cdk.App()
drills = app.node.try_get_context("drills") == "true" or os.environ.get("DRILLS") == "1"
BillingStack(app, app.node.try_get_context("stack") or "Billing", drills=drills)
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
