"""Add a guarded job to your own CDK stack: the README's example, run by tests/infra.

From the repository root: ``npx cdk synth --app "python -m infra.examples.own_stack"``.
"""

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from handlers.jobs import CRM_SYNC  # the JobDefinition your handler guards itself with
from jobguard.cdk import GuardedJob, JobTable, LambdaBundle, alarms_to_email


class ReportsStack(cdk.Stack):  # your existing stack
    def __init__(self, scope, construct_id, **kwargs):
        super().__init__(scope, construct_id, **kwargs)
        alarms = alarms_to_email("oncall@example.com", runbook="https://wiki.example.com/jobs")
        table = JobTable(self, "Jobs", alarms=alarms)  # leases, run records, the item ledger
        code = LambdaBundle(self, "Code", packages=["handlers"])  # jobguard + your handlers
        GuardedJob(self, "CrmSync", job=CRM_SYNC, table=table, bundle=code, alarms=alarms)


app = cdk.App()
ReportsStack(app, "Reports")
cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
