"""What every jobguard function runs from: one code asset and its dependencies, no Docker.

- **Code**: the installed ``jobguard`` package plus your handler packages, copied into a
  content-addressed folder of the build cache (no ``__pycache__``). One asset, shared by
  every function of a stack, and lean: never the operator and test tools
  (:data:`NEVER_SHIPPED`: the CLI, the fault harness, the test helpers, the emulator, the
  timeline), and the drill switches (:data:`DRILL_CODE`) only in a drill deployment.
- **Dependencies** (:class:`Dependencies`): the public Powertools for AWS Lambda layer
  (default: nothing to build, so ``cdk synth`` is offline; its pydantic and the runtime's
  boto3 are not the versions your tests ran), a layer of platform wheels of exactly the
  versions installed here (:func:`layer_requirements`: what the tests ran), or host wheels
  for the local emulator, whose Lambdas run on the host's interpreter.

pip, when a layer is built, runs once per requirement set and platform; the result is
kept in the build cache (``.local/cdk-build/``, ignored by git), so later synths are
offline.

Example:
    >>> bundle = LambdaBundle(stack, "Bundle", packages=["handlers"])  # doctest: +SKIP
    >>> bundle.has_module("handlers.crm_sync")  # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from aws_cdk import Aws, Stack, Tags
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

import jobguard
from jobguard.errors import ConfigError

from ._context import LOCAL, check_drills_account, check_local_account, local_deployment

__all__ = [
    "ARCHITECTURE",
    "BUILD_DIR",
    "DRILL_CODE",
    "NEVER_SHIPPED",
    "POWERTOOLS_LAYER_RELEASES",
    "POWERTOOLS_LAYER_VERSION",
    "RUNTIME",
    "Dependencies",
    "LambdaBundle",
    "layer_requirements",
    "pip_command",
    "powertools_layer_arn",
]

RUNTIME = lambda_.Runtime.PYTHON_3_14
"""Every jobguard function's runtime (the Powertools layer is published per version)."""

ARCHITECTURE = lambda_.Architecture.ARM_64

POWERTOOLS_LAYER_ACCOUNT = "017000801446"
POWERTOOLS_LAYER_VERSION = 36
"""The public Powertools v3 layer version used unless ``jobguard:powertoolsLayerVersion``
says otherwise. The layer carries Powertools with its extras, pydantic v2 among them."""
POWERTOOLS_LAYER_RELEASES = {36: "3.31.1"}
"""The Powertools release each known layer version carries. The dev extra pins
Powertools to the default layer's release, so the tests run what the functions run
(``tests/infra/test_pins`` checks)."""

BUILD_DIR = Path(os.environ.get("JOBGUARD_CDK_BUILD_DIR") or Path.cwd() / ".local" / "cdk-build")
"""The build cache: staged code and pip-built layers. ``.local/cdk-build`` in the folder
the CDK app runs from (the one holding ``cdk.json``; ignore it in git), or
``JOBGUARD_CDK_BUILD_DIR``."""

WHEEL_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
"""Wheels Lambda's arm64 Amazon Linux 2023 runs (glibc 2.34)."""

CODE_KEPT_FOR = timedelta(days=7)
"""Staged code folders unused this long are removed from the build cache."""

PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore"})
"""Left out of a host layer, with what only they need: the local emulator's own botocore
must not be shadowed. A Lambda layer carries them: the layer comes before the runtime's
own copy on the path, so the functions run the SDK the tests ran."""
LAMBDA_MARKERS = {
    "python_version": RUNTIME.name.removeprefix("python"),
    "python_full_version": RUNTIME.name.removeprefix("python") + ".0",
    "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64",
    "os_name": "posix", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "extra": "",
}
"""The environment a requirement's marker is judged in for a Lambda layer."""

_EXCLUDED_PARTS = {"__pycache__"}
_EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
NEVER_SHIPPED = frozenset({("jobguard", "cli"), ("jobguard", "faults.py"),
                           ("jobguard", "testing"), ("jobguard", "pytest_plugin.py"),
                           ("jobguard", "_offline.py"), ("jobguard", "local"),
                           ("jobguard", "cdk"), ("jobguard", "timeline")})
"""Operator, test and deployment tools no function imports: ``jobguard`` (the CLI), the
fault harness, the testing kit and its pytest plugin (with its seal), the local emulator, these
constructs, the timeline (``jobguard timeline``)."""
DRILLS_TAG = "jobguard:drills"
"""The tag (``true``) on every resource of a stack with a drills bundle."""
DRILL_CODE = frozenset({("jobguard", "drill")})
"""The drill package: imported by a function only when ``JOBGUARD_DRILLS=1`` (a drill
deployment), so only a drill deployment's asset carries it."""

Runner = Callable[[list[str]], None]


class Dependencies(StrEnum):
    """Where a function's third-party packages come from."""

    POWERTOOLS_LAYER = "powertools-layer"
    """The public Powertools for AWS Lambda (Python) v3 layer for arm64. Nothing is built."""

    WHEELS = "wheels"
    """A layer of manylinux aarch64 wheels for the runtime's CPython: every runtime
    dependency, boto3 and botocore included, at exactly the version installed in the
    synthesizing environment (:func:`layer_requirements`; built once with pip)."""

    HOST = "host"
    """A layer of wheels for this machine's interpreter: the local emulator runs Lambdas
    on its own interpreter, where aarch64 wheels of compiled packages do not import."""


class LambdaBundle(Construct):
    """The code asset and dependency layers every jobguard function of a stack uses.

    Args:
        packages: directories of your handler packages (e.g. ``handlers``); the
            installed ``jobguard`` package is always included.
        dependencies: see :class:`Dependencies` (``POWERTOOLS_LAYER`` by default; ``HOST``
            with ``-c jobguard:local=true``, the only one the local AWS runs).
        powertools_layer_version: the public layer's version (POWERTOOLS_LAYER only).
        build_dir: the build cache.
        drills: a drill deployment: the asset carries the drill switches, and every
            :class:`GuardedJob`, :class:`Reconciler` and :class:`RecoveryFunction` built
            with it deploys its jobs' drill timings, sets ``JOBGUARD_DRILLS=1`` and may
            read the jobs' drill switches. Outside the local AWS (``-c
            jobguard:local=true``) the stack must be bound to an account listed in ``-c
            jobguard:drillsAccounts``; the stack is tagged ``jobguard:drills=true``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        packages: Sequence[str | Path] = (),
        dependencies: Dependencies | None = None,
        powertools_layer_version: int = POWERTOOLS_LAYER_VERSION,
        build_dir: Path = BUILD_DIR,
        run: Runner | None = None,
        drills: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.runtime = RUNTIME
        self.architecture = ARCHITECTURE
        if not isinstance(drills, bool):
            raise ConfigError("drills", f"must be True or False, got {drills!r}")
        self.drills = drills
        if drills:  # never a production deployment because a flag leaked: refused, and
            check_drills_account(self)  # a drillable stack says so in its tags
            Tags.of(Stack.of(self)).add(DRILLS_TAG, "true")
        check_local_account(self)
        local = local_deployment(self)
        if dependencies is None:
            dependencies = Dependencies.HOST if local else Dependencies.POWERTOOLS_LAYER
        self.dependencies = Dependencies(dependencies)
        if local and self.dependencies is not Dependencies.HOST:
            raise ConfigError("dependencies", f"{self.dependencies.value!r} contradicts "
                              f"{LOCAL}=true (the local AWS runs host wheels)")
        roots = [Path(jobguard.__file__).resolve().parent]
        roots += [Path(p).resolve() for p in packages]
        self.code_dir = stage_code(
            roots, build_dir, exclude=NEVER_SHIPPED if drills else NEVER_SHIPPED | DRILL_CODE)
        self.code = lambda_.Code.from_asset(str(self.code_dir))
        self._codes: dict[str, lambda_.Code] = {}
        self.layers: list[lambda_.ILayerVersion]
        if self.dependencies is Dependencies.POWERTOOLS_LAYER:
            if not isinstance(powertools_layer_version, int) or powertools_layer_version < 1:
                raise ConfigError("powertools_layer_version",
                                  f"must be a layer version >= 1, got {powertools_layer_version!r}")
            self.layers = [lambda_.LayerVersion.from_layer_version_arn(
                self, "Powertools", powertools_layer_arn(powertools_layer_version))]
        else:
            host = self.dependencies is Dependencies.HOST
            layer_dir = build_layer(layer_requirements(host=host), host=host,
                                    build_dir=build_dir, run=run or _run)
            self.layers = [lambda_.LayerVersion(
                self, "Dependencies",
                code=lambda_.Code.from_asset(str(layer_dir)),
                compatible_runtimes=[self.runtime],
                compatible_architectures=[self.architecture],
                description=("jobguard dependencies for the local emulator (host wheels)"
                             if host else "jobguard dependencies (manylinux aarch64 wheels)"),
            )]

    def code_for(self, scope: Construct) -> lambda_.Code:
        """The code asset for a function in ``scope``: :attr:`code` in this bundle's stack,
        one asset per other stack (a nested stack of a :class:`JobFleet`), which CDK
        requires; the same files, so the same asset hash, uploaded once."""
        stack = Stack.of(scope)
        if stack is Stack.of(self):
            return self.code
        path = stack.node.path
        if path not in self._codes:
            self._codes[path] = lambda_.Code.from_asset(str(self.code_dir))
        return self._codes[path]

    def has_module(self, module: str) -> bool:
        """Whether ``module`` (dotted) is in the code asset."""
        path = self.code_dir.joinpath(*module.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def powertools_layer_arn(version: int) -> str:
    """The public Powertools v3 layer ARN for this stack's region (arm64, the runtime's
    Python). Published in the ``aws`` partition's commercial regions."""
    python = RUNTIME.name.replace(".", "")  # python3.14 -> python314
    name = f"AWSLambdaPowertoolsPythonV3-{python}-arm64"
    return (f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{POWERTOOLS_LAYER_ACCOUNT}"
            f":layer:{name}:{version}")


# -- code asset ---------------------------------------------------------------------------

def stage_code(package_dirs: Sequence[Path], build_dir: Path, *,
               exclude: frozenset[tuple[str, str]] = NEVER_SHIPPED) -> Path:
    """Copy the packages into ``build_dir/code-<content hash>`` (once) and return it,
    leaving out ``exclude`` ((package, top-level module or subpackage) pairs)."""
    names: dict[str, Path] = {}
    for directory in package_dirs:
        if not (directory / "__init__.py").is_file():
            raise ConfigError("packages", f"{directory} is not a Python package directory")
        if directory.name in names and names[directory.name] != directory:
            raise ConfigError("packages", f"two packages named {directory.name!r}: "
                              f"{names[directory.name]} and {directory}")
        names[directory.name] = directory
    files = sorted(f for d in names.values() for f in _package_files(d, exclude))
    digest = hashlib.sha256()
    for relative, source in files:
        digest.update(relative.encode() + b"\0" + source.read_bytes() + b"\0")
    target = build_dir / f"code-{digest.hexdigest()[:16]}"
    if target.is_dir():
        os.utime(target)  # in use: not pruned
    else:
        staging = build_dir / f".staging-{uuid.uuid4().hex}"
        for relative, source in files:
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
        _publish(staging, target)
    _prune(build_dir, keep=target)
    return target


def _prune(build_dir: Path, *, keep: Path) -> None:
    """Drop staged code nobody has used for a week (each edit stages a new folder)."""
    horizon = time.time() - CODE_KEPT_FOR.total_seconds()
    for old in build_dir.glob("code-*"):
        try:
            if old != keep and old.stat().st_mtime < horizon:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue  # pruned by another synth meanwhile


def _package_files(package_dir: Path, exclude: frozenset[tuple[str, str]]
                   ) -> Iterator[tuple[str, Path]]:
    for path in package_dir.rglob("*"):
        if not path.is_file() or path.suffix in _EXCLUDED_SUFFIXES:
            continue
        parts = (package_dir.name, *path.relative_to(package_dir).parts)
        if _EXCLUDED_PARTS.intersection(parts) or parts[:2] in exclude:
            continue
        yield "/".join(parts), path


# -- dependency layer -----------------------------------------------------------------------

def layer_requirements(distribution: str = "jobguard", *, host: bool = False) -> list[str]:
    """Every distribution ``distribution``'s runtime needs, each pinned to the version
    installed here: the versions the tests ran (``make`` installs them from
    ``requirements/dev.lock``; ``tests/infra/test_pins`` compares the three).

    The whole closure, not only jobguard's own requirements (pip would pick the rest,
    typing-extensions or urllib3, freely). Requirements of extras are left out, and a
    marker is judged for the runtime (:data:`LAMBDA_MARKERS`), or for this interpreter
    when ``host``; a host layer also leaves out :data:`PROVIDED_BY_RUNTIME` and what only
    they need.

    Example:
        >>> "botocore==" + importlib.metadata.version("botocore") in layer_requirements()
        True
    """
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip, which builds the layer, carries its own copy
        from pip._vendor.packaging.requirements import Requirement  # type: ignore[assignment]

    environment = None if host else LAMBDA_MARKERS
    skipped = PROVIDED_BY_RUNTIME if host else frozenset()
    pinned: dict[str, str] = {}
    pending = [distribution]
    while pending:
        for text in importlib.metadata.requires(pending.pop()) or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate(
                    environment):  # an extra's requirement, or another platform's
                continue
            name = _normalized(requirement.name)
            if name in pinned or name in skipped or name == _normalized(distribution):
                continue
            try:
                pinned[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                raise ConfigError("dependencies", f"{requirement} (needed by the functions) "
                                  "is not installed here: install jobguard's dependencies "
                                  "before building a layer of them") from None
            pending.append(name)
    return sorted(f"{name}=={version}" for name, version in pinned.items())


def _normalized(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_command(target: Path, requirements: Sequence[str], *, host: bool) -> list[str]:
    """The pip command that installs ``requirements`` into ``target`` (a layer's
    ``python/`` folder): binary wheels only, for Lambda's platform unless ``host``."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
               "--disable-pip-version-check", "--only-binary=:all:", "--target", str(target)]
    if not host:
        python = RUNTIME.name.removeprefix("python")
        for platform in WHEEL_PLATFORMS:
            command += ["--platform", platform]
        command += ["--implementation", "cp", "--python-version", python]
    return command + list(requirements)


def build_layer(requirements: Sequence[str], *, host: bool, build_dir: Path,
                run: Runner) -> Path:
    """Build (once) and return the layer folder for ``requirements``."""
    platform = (f"host-{sys.implementation.name}{sys.version_info[0]}{sys.version_info[1]}"
                f"-{sys.platform}" if host else f"lambda-{RUNTIME.name}-arm64")
    key = hashlib.sha256(json.dumps([platform, list(requirements)]).encode()).hexdigest()[:16]
    target = build_dir / f"layer-{platform}-{key}"
    if (target / "python").is_dir():
        return target
    staging = build_dir / f".staging-{uuid.uuid4().hex}"
    run(pip_command(staging / "python", requirements, host=host))
    for leftover in [*(staging / "python").rglob("__pycache__"), staging / "python" / "bin"]:
        shutil.rmtree(leftover, ignore_errors=True)  # bytecode for another Python; scripts
    _publish(staging, target)
    return target


def _publish(staging: Path, target: Path) -> None:
    """Move a finished staging folder into place; another process may have won."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not target.is_dir():
            raise


def _run(command: list[str]) -> None:
    try:
        subprocess.run(command, check=True)
    except subprocess.CalledProcessError as exc:
        raise ConfigError("dependencies", f"pip could not build the dependency layer "
                          f"(exit {exc.returncode}): {' '.join(command)}") from exc
