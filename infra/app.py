"""The CDK app ``cdk.json`` names: ``python -m infra.app``.

One stack for the jobs in ``handlers.jobs.JOBS``, checked by cdk-nag's AWS Solutions
rules (cdk-nag 3: a CDK policy validation plugin; an unacknowledged finding fails the
synthesis). Context values (``-c jobguard:...``) are listed in :mod:`infra.settings`;
``-c jobguard:local=true`` selects host-platform dependencies for the local emulator.

Three deployments, each its own stack and tag (``jobguard:deployment``): production
(``JobGuard``), drills in a test account (``JobGuard-drills``: only an account on
``jobguard:drillsAccounts``, and the stack is bound to it) and local (``JobGuard-local``,
the emulator's account).

Example:
    >>> app = build_app({"jobguard:recoveryInvokers": "123456789012"})  # doctest: +SKIP
    >>> app.synth()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on sys.path, not infra/
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import aws_cdk as cdk  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.settings import DEPLOYMENT_TAG, StackSettings  # noqa: E402
from infra.stack import JobGuardStack  # noqa: E402
from jobguard.definitions import JobDefinition  # noqa: E402

__all__ = ["CDK_JSON", "build_app", "cdk_json_context"]

CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    """The context in ``cdk.json`` (feature flags), so that an app built in a test
    synthesizes exactly as ``cdk synth`` does."""
    if not CDK_JSON.is_file():
        return {}
    context: dict[str, Any] = json.loads(CDK_JSON.read_text()).get("context", {})
    return context


def build_app(
    context: Mapping[str, Any] | None = None,
    *,
    outdir: str | None = None,
    jobs: Sequence[JobDefinition] | None = None,
    account: str | None = None,
) -> cdk.App:
    """The app with the jobguard stack and cdk-nag's AWS Solutions checks.

    Context given on the command line (or by ``cdk.json``) wins over ``context``.
    ``account`` is the account being deployed to (default: ``CDK_DEFAULT_ACCOUNT``, which
    the CDK CLI sets from the caller's credentials).
    """
    if jobs is None:
        from handlers.jobs import JOBS

        jobs = JOBS
    app = cdk.App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    settings = StackSettings.from_context(
        app.node.try_get_context, account=account or os.environ.get("CDK_DEFAULT_ACCOUNT"))
    env = None
    if settings.deployment == "drills":  # cdk deploy refuses any other account
        env = cdk.Environment(account=settings.account,
                              region=os.environ.get("CDK_DEFAULT_REGION"))
    JobGuardStack(app, settings.stack_name, jobs=jobs, settings=settings, env=env)
    cdk.Tags.of(app).add("project", "jobguard")
    cdk.Tags.of(app).add(DEPLOYMENT_TAG, settings.deployment)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app


def main() -> None:
    build_app().synth()


if __name__ == "__main__":
    main()
