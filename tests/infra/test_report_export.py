"""report-export's own data: its bucket, what its function may do there, the variable
that names it, and the stack outputs ``jobguard drill`` reads."""

from __future__ import annotations

import json
from typing import Any

from handlers import report_export
from jobguard.deployment import job_output_key

from .conftest import Synth


def _bucket(synth: Synth) -> Any:
    data = synth.stack.report_export_data
    assert data is not None
    return data.bucket


def test_the_bucket_is_versioned_encrypted_private_and_kept(synth: Synth) -> None:
    bucket = _bucket(synth)
    resource = synth.resource(bucket)
    properties = resource["Properties"]
    # versioned: an overwrite would leave a second version, so versions count exports
    assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
    [rule] = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True}
    assert properties["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert resource["DeletionPolicy"] == resource["UpdateReplacePolicy"] == "Retain"


def test_the_bucket_refuses_requests_without_tls(synth: Synth) -> None:
    bucket_ref = {"Ref": synth.logical_id(_bucket(synth))}
    [policy] = [p for p in synth.of_type("AWS::S3::BucketPolicy").values()
                if p["Properties"]["Bucket"] == bucket_ref]
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Deny" and statement["Action"] == "s3:*"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_only_the_job_function_is_told_the_bucket(synth: Synth) -> None:
    bucket_ref = {"Ref": synth.logical_id(_bucket(synth))}
    job = synth.stack.jobs["report-export"].function
    for function in synth.stack.functions:
        variables = synth.properties(function)["Environment"]["Variables"]
        if function is job:
            assert variables[report_export.BUCKET] == bucket_ref
        else:
            assert report_export.BUCKET not in variables, function.node.path


def test_outputs_name_everything_the_drills_drive_and_inspect(synth: Synth) -> None:
    outputs = synth.template.to_json()["Outputs"]
    stack = synth.stack
    crm = stack.crm_sync_data
    assert crm is not None

    def ref(construct: Any) -> dict[str, Any]:
        return {"Ref": synth.logical_id(construct)}

    expected = {
        "TableName": ref(stack.table.table),
        "RecoveryFunctionName": ref(stack.recovery.function),
        "CrmContactChangesTable": ref(crm.feed),
        "CrmNotesTable": ref(crm.notes),
        "ReportBucketName": ref(_bucket(synth)),
        "CrmSyncReconcilerFunctionName": ref(stack.reconcilers[0].function),
    }
    assert {name: outputs[name]["Value"] for name in expected} == expected
    # every job of the stack has its output (jobguard.deployment's contract), naming its
    # function and its queue when it has one (tests/infra/test_destinations reads them)
    for name, job in stack.jobs.items():
        value = json.dumps(outputs[job_output_key(name)]["Value"])
        assert json.dumps(ref(job.function)) in value
        assert (job.trigger_queue is not None) == (
            job.trigger_queue is not None and json.dumps(ref(job.trigger_queue)) in value)
    # the per-job outputs the contract replaced are gone
    assert not [k for k in outputs if k.endswith(("FunctionName", "TriggerQueueUrl"))
                and "Reconciler" not in k and "Recovery" not in k]
