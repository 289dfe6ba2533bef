"""Which BatchJobs a recovery or reconciler function knows about.

Registering a job is one line in the job's own module::

    crm_sync = CrmSync(CRM_SYNC.config())
    register(crm_sync)

The recovery Lambda imports the modules named in ``JOBGUARD_RECOVERY_MODULES`` (set by
the stack), which registers their jobs.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ConfigError

__all__ = ["get", "guarded_in_modules", "load_from_environment", "names", "register"]

_JOBS: dict[str, Any] = {}


def register(job: Any) -> Any:
    """Make ``job`` (a :class:`jobguard.BatchJob`) known to recovery. Returns it."""
    from .batch import BatchJob

    if not isinstance(job, BatchJob):
        raise ConfigError("job", f"only a BatchJob can be registered, got {type(job).__name__}")
    _JOBS[job.config.name] = job
    return job


def get(name: str) -> Any:
    """The registered job called ``name``; :class:`ConfigError` naming ``job`` if none."""
    try:
        return _JOBS[name]
    except KeyError:
        known = ", ".join(sorted(_JOBS)) or "none"
        raise ConfigError("job", f"{name!r} is not a registered BatchJob (registered: {known})"
                          ) from None


def guarded_in_modules(name: str) -> Any:
    """The plain ``@guarded`` job called ``name`` defined in one of the modules
    ``JOBGUARD_RECOVERY_MODULES`` lists (under any decorators' ``__wrapped__``), or None.
    Recovery can plan such a job's unresolved items, not replay them."""
    import sys

    from . import environment
    from .guard import GuardedJob

    try:
        modules = environment.recovery_modules()
    except ConfigError:
        return None  # no modules named: no plain job to find either
    for module_name in modules:
        module = sys.modules.get(module_name)
        for value in vars(module).values() if module is not None else ():
            seen = 0
            while not isinstance(value, GuardedJob) and seen < 10:
                value, seen = getattr(value, "__wrapped__", None), seen + 1
                if value is None:
                    break
            if isinstance(value, GuardedJob) and value.config.name == name:
                return value
    return None


def names() -> list[str]:
    return sorted(_JOBS)


def load_from_environment() -> list[str]:
    """Import the modules listed in ``JOBGUARD_RECOVERY_MODULES``."""
    from . import environment

    modules = environment.recovery_modules()  # refused naming the variable if malformed
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(environment.RECOVERY_MODULES,
                              f"cannot import {module!r}: {exc}") from exc
    return names()
