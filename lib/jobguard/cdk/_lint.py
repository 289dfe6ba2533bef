"""Acknowledging a template linter's finding, with its reason, on the resource it is about.

cdk-nag's acknowledgements live next to the construct (``Validations.of(x).acknowledge``);
checkov's and cfn-lint's do too, as CloudFormation metadata on the resource they name:

- checkov: ``Metadata: {checkov: {skip: [{id, comment}]}}`` (the comment is the reason);
- cfn-lint: ``Metadata: {cfn-lint: {config: {ignore_checks: [id]}}}``, and the reason
  under ``Metadata: {jobguard: {acknowledged: {id: reason}}}`` (cfn-lint's own metadata
  has no place for one).

``tests/infra/test_linters`` runs both on the production, drills and local templates and
fails on any finding not acknowledged this way, and on an acknowledgement without reason.

Example:
    >>> acknowledge(function, "CKV_AWS_117", "reaches only AWS APIs")  # doctest: +SKIP
"""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import CfnResource
from constructs import IConstruct

__all__ = ["acknowledge", "acknowledgements"]

_CHECKOV = re.compile(r"^CKV2?_[A-Z0-9]+_\d+$")
_CFN_LINT = re.compile(r"^[EWI]\d{4}$")


def _resource(construct: IConstruct) -> CfnResource:
    element = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if not isinstance(element, CfnResource):
        raise ValueError(f"{construct.node.path}: no CloudFormation resource to acknowledge on")
    return element


def acknowledge(construct: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge checkov's or cfn-lint's ``rule`` on ``construct``'s resource."""
    if not reason.strip():
        raise ValueError(f"{rule}: an acknowledgement needs its reason")
    resource = _resource(construct)
    if _CHECKOV.fullmatch(rule):
        meta: dict[str, Any] = resource.get_metadata("checkov") or {"skip": []}
        if all(s["id"] != rule for s in meta["skip"]):
            meta["skip"].append({"id": rule, "comment": reason})
        resource.add_metadata("checkov", meta)
    elif _CFN_LINT.fullmatch(rule):
        lint: dict[str, Any] = resource.get_metadata("cfn-lint") or {
            "config": {"ignore_checks": []}}
        if rule not in lint["config"]["ignore_checks"]:
            lint["config"]["ignore_checks"].append(rule)
        resource.add_metadata("cfn-lint", lint)
        ours: dict[str, Any] = resource.get_metadata("jobguard") or {"acknowledged": {}}
        ours["acknowledged"][rule] = reason
        resource.add_metadata("jobguard", ours)
    else:
        raise ValueError(f"{rule!r} is neither a checkov (CKV_...) nor a cfn-lint rule id")


def acknowledgements(resource: dict[str, Any]) -> dict[str, str]:
    """Every acknowledgement on a synthesized resource: rule id -> reason."""
    metadata = resource.get("Metadata", {})
    found = {s["id"]: s.get("comment", "") for s in metadata.get("checkov", {}).get("skip", [])}
    reasons = metadata.get("jobguard", {}).get("acknowledged", {})
    for rule in metadata.get("cfn-lint", {}).get("config", {}).get("ignore_checks", []):
        found[rule] = reasons.get(rule, "")
    return found
