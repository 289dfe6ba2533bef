"""Production, drills and local deployments are separate stacks that cannot replace one
another: each its own name and tag, drills only into an allow-listed account (bound to
it), local only into the emulator's account."""

from __future__ import annotations

from typing import Any

import pytest

from infra.app import build_app
from infra.settings import DEPLOYMENT_TAG, LOCAL_ACCOUNT, StackSettings
from jobguard.errors import ConfigError
from jobguard.local.deploy import DEFAULT_STACK

from .conftest import DRILLS_ACCOUNT, Synth

PROD_ACCOUNT = "999988887777"


def _tags(template: dict[str, Any]) -> set[str]:
    """The deployment tag's values on every taggable function of the template."""
    return {t["Value"] for r in template["Resources"].values()
            if r["Type"] == "AWS::Lambda::Function"
            for t in r["Properties"].get("Tags", []) if t["Key"] == DEPLOYMENT_TAG}


def test_each_deployment_has_its_own_stack_name_and_tag(
        synth: Synth, drill: Any, drills_in_account: Any) -> None:
    assert (synth.stack.stack_name, _tags(synth.template.to_json())) == (
        "JobGuard", {"production"})
    local_stack, local_template, _ = drill
    assert (local_stack.stack_name, _tags(local_template)) == ("JobGuard-local", {"local"})
    drills_stack, drills_template, _ = drills_in_account
    assert (drills_stack.stack_name, _tags(drills_template)) == ("JobGuard-drills", {"drills"})


def test_make_demo_deploys_the_local_stack_by_its_name() -> None:
    settings = StackSettings.from_context({"jobguard:local": "true", "jobguard:drills": "true",
                                           "jobguard:stackName": DEFAULT_STACK},
                                          account=LOCAL_ACCOUNT)
    assert settings.stack_name == DEFAULT_STACK == "JobGuard-local"


def test_a_drills_stack_is_bound_to_its_allow_listed_account(drills_in_account: Any) -> None:
    stack, _, _ = drills_in_account
    assert stack.account == DRILLS_ACCOUNT  # cdk deploy refuses other credentials


@pytest.mark.parametrize("account", [PROD_ACCOUNT, None])
def test_a_drills_synth_refuses_an_account_not_on_the_allow_list(account: str | None) -> None:
    with pytest.raises(ConfigError) as refused:
        build_app({"jobguard:drills": "true", "jobguard:drillsAccounts": DRILLS_ACCOUNT},
                  account=account)
    assert refused.value.field == "jobguard:drillsAccounts"
    assert DRILLS_ACCOUNT in str(refused.value)
    with pytest.raises(ConfigError):  # no allow-list at all: nowhere
        StackSettings.from_context({"jobguard:drills": "true"}, account=DRILLS_ACCOUNT)


def test_a_local_synth_refuses_a_real_account() -> None:
    with pytest.raises(ConfigError) as refused:
        StackSettings.from_context({"jobguard:local": "true"}, account=PROD_ACCOUNT)
    assert refused.value.field == "account"
    assert StackSettings.from_context({"jobguard:local": "true"}).stack_name == "JobGuard-local"


@pytest.mark.parametrize("context", [
    {"jobguard:drills": "true", "jobguard:drillsAccounts": DRILLS_ACCOUNT,
     "jobguard:stackName": "JobGuard"},
    {"jobguard:local": "true", "jobguard:stackName": "JobGuard"},
    {"jobguard:local": "true", "jobguard:stackName": "JobGuard-drills"},
])
def test_a_drills_or_local_stack_may_not_take_a_production_name(
        context: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as refused:
        StackSettings.from_context(context, account=DRILLS_ACCOUNT
                                   if "jobguard:drillsAccounts" in context else None)
    assert refused.value.field == "stack_name"


def test_allow_listed_accounts_must_be_account_ids() -> None:
    with pytest.raises(ConfigError) as refused:
        StackSettings.from_context({"jobguard:drills": "true",
                                    "jobguard:drillsAccounts": "prod"}, account="prod")
    assert refused.value.field in ("jobguard:drillsAccounts", "account")
