import os

from billing.jobs import INVOICE_MAILER
from jobguard import WorkId, aws_client, current_run, guarded
from jobguard.destinations import DynamoDBDestination


def due_invoices():
    return [{"id": "inv-1", "to": "ana@example.com"}, {"id": "inv-2", "to": "bo@example.com"}]


@guarded(INVOICE_MAILER.as_deployed().config())
def lambda_handler(event, context):
    run = current_run()
    sent = DynamoDBDestination(os.environ["SENT_TABLE"], client=aws_client("dynamodb"))
    for item in run.claim(due_invoices(), work_id=lambda inv: WorkId(inv["id"], "mail"),
                          reconcile=lambda inv, row: sent.reconcile(row.work_id)):
        with item:
            item.complete(destination_id=sent.put(item.key, {"to": item.record["to"]}))
    return run.stats
