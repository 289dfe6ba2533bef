"""Two jobs of a billing team: what the e2e test deploys (tests/ship/test_own_stack.py)."""
from datetime import timedelta

from jobguard import OverlapPolicy
from jobguard.definitions import JobDefinition

INVOICE_MAILER = JobDefinition(
    name="invoice-mailer",
    handler="billing.mailer.lambda_handler",
    schedule="rate(5 minutes)",
    policy=OverlapPolicy.SKIP,        # a tick during a run is recorded `skipped`
    timeout=timedelta(minutes=5),
    lease=timedelta(minutes=2),
    environment={"SENT_TABLE": "billing-invoices-sent"},
)
STATEMENT_EXPORT = JobDefinition(
    name="statement-export",
    handler="billing.statements.lambda_handler",
    schedule="rate(1 hour)",
    policy=OverlapPolicy.QUEUE,       # a tick during a run waits on the trigger queue
    timeout=timedelta(minutes=2),
    lease=timedelta(minutes=1),
    environment={"STATEMENTS_TABLE": "billing-statements"},
)
JOBS = (INVOICE_MAILER, STATEMENT_EXPORT)
