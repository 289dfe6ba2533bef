import os

from billing.jobs import STATEMENT_EXPORT
from jobguard import WorkId, aws_client, current_run, guarded
from jobguard.destinations import DynamoDBDestination


@guarded(STATEMENT_EXPORT.as_deployed().config())
def lambda_handler(event, context):
    run = current_run()
    out = DynamoDBDestination(os.environ["STATEMENTS_TABLE"], client=aws_client("dynamodb"))
    accounts = [{"id": f"acct-{n}"} for n in range(3)]
    for item in run.claim(accounts, work_id=lambda a: WorkId(a["id"], "statement"),
                          reconcile=lambda a, row: out.reconcile(row.work_id)):
        with item:
            item.complete(destination_id=out.put(item.key, {"account": item.record["id"]}))
    return run.stats
