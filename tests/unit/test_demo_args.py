"""`make demo DEMO_ARGS=...`: a mistyped drill or job is refused before anything starts
(it used to deploy for a minute and then die with a traceback)."""

from __future__ import annotations

import pytest

from jobguard.local import demo


@pytest.mark.parametrize(("argv", "says"), [
    (["--only", "lease-expiri"], "error: --only: unknown drill lease-expiri"),
    (["--only", "lease-expiry", "--only", "partial-failur"], "did you mean partial-failure?"),
    (["--job", "crm-synk"], "error: --job: 'crm-synk' is not a job of this stack"),
    (["--job", "crm-sync", "--only", "second-worker"], "(drills: crm-sync:overlap"),
])
def test_a_mistyped_selection_is_refused_before_the_local_aws_starts(monkeypatch, argv, says):
    started: list[bool] = []
    monkeypatch.setattr(demo.LocalStack, "start",
                        classmethod(lambda cls, **_: started.append(True)))  # a tripwire
    with pytest.raises(SystemExit) as exited:
        demo.main(argv)
    assert says in str(exited.value) and not started
