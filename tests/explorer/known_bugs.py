"""The known bugs: issue 14's eleven trigger-state defects, issue 33's garbage message
(#12) and issue 30's link that ignores its hand-off (#13), each
kept here as source patches on ``lib/jobguard`` so that the explorer
(``make explore MUTANTS=all``) and the tests can bring one back, in their own process,
and prove they find it. Nothing under ``lib/jobguard`` knows about them.

A patch names a module, the correct text (which must occur exactly once in that
module's file) and the buggy text that replaces it. :func:`switch_to` compiles each
patched module under its real filename and swaps the code of the functions the patch
changed into the live function objects (``__code__``), so every reference already held
(``from jobguard.lease import parse_lease``, a bound method, an enum's identity) runs the
buggy code, and :func:`switch_to` with no name swaps the originals back. A process
forked after the swap inherits it; ``explore``'s pool workers apply it in their
initializer, so spawned ones get it too.

Drift in ``lib/jobguard`` fails loudly, naming the bug and the module: a correct text
found zero or several times, a patch that changes anything but function bodies (a
default value, a class attribute, an import at module level), a function the patch
changed that the live module does not have, or a live function whose code is no longer
its file's (the file changed after it was imported).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FunctionType
from typing import Any

__all__ = ["KNOWN", "KnownBug", "Patch", "PatchError", "active", "compile_bug", "only",
           "switch_to"]


class PatchError(RuntimeError):
    """A known bug's patch no longer fits ``lib/jobguard``."""


@dataclass(frozen=True)
class Patch:
    module: str
    """The dotted module name, e.g. ``jobguard.guard``."""
    correct: str
    """Today's text: must occur exactly once in the module's file."""
    buggy: str
    """What replaces it: the defect as it was."""


@dataclass(frozen=True)
class KnownBug:
    name: str
    number: int
    """The behaviour's number: issue 14's #1-#11, issue 33's #12 (``known.BUGS``)."""
    description: str
    patches: tuple[Patch, ...]


# -- the buggy code's helpers (what the store did for the old defects) --------------------

def failed_triggers(store: Any, job: str) -> list[str]:
    """(#1) The job's trigger items failed as of now (a consistent query)."""
    from jobguard._dynamo import plain
    from jobguard.schema import PARTITION_KEY, SORT_KEY, TRIGGER_PREFIX, job_pk

    response = store._client.query(
        TableName=store.table_name,
        KeyConditionExpression="#pk = :pk AND begins_with(#sk, :t)",
        FilterExpression="#s = :f",
        ExpressionAttributeNames={"#pk": PARTITION_KEY, "#sk": SORT_KEY, "#s": "state"},
        ExpressionAttributeValues={":pk": {"S": job_pk(job)}, ":t": {"S": TRIGGER_PREFIX},
                                   ":f": {"S": "failed"}}, ConsistentRead=True)
    return [str(plain(i)[SORT_KEY])[len(TRIGGER_PREFIX):] for i in response["Items"]]


def forget(store: Any, job: str, trigger_ids: list[str]) -> None:
    """(#1) Delete these trigger items, whatever they are now."""
    for trigger_id in trigger_ids:
        store._client.delete_item(TableName=store.table_name,
                                  Key=store._trigger_key(job, trigger_id))


def drop_follow_up(store: Any, job: str, follow_up_id: str) -> None:
    """(#5) Undo the follow-up whatever else coalesced onto it: off the lease row, its
    item deleted."""
    store._client.update_item(TableName=store.table_name, Key=store._lease_key(job),
                              UpdateExpression="REMOVE #f",
                              ExpressionAttributeNames={"#f": "follow_up"})
    store._client.delete_item(TableName=store.table_name,
                              Key=store._trigger_key(job, follow_up_id))


# -- the bugs -------------------------------------------------------------------------------

_BUGS = (
    KnownBug("release-prunes-from-old-read", 1,
             "a release deletes trigger items it saw failed at acquire time, whatever "
             "they are now", (
                 Patch("jobguard._guard_run", """\
                "previous_run_id": acquired.displaced_run_id})
        heartbeat = Heartbeat(
""", """\
                "previous_run_id": acquired.displaced_run_id})
        from tests.explorer.known_bugs import failed_triggers, forget
        pruned = failed_triggers(rt.store, config.name)
        heartbeat = Heartbeat(
"""),
                 Patch("jobguard._guard_run", """\
            keep_follow_up=service,
        ))
        if not released.released:
""", """\
            keep_follow_up=service,
        ))
        if pruned and released.released:
            forget(rt.store, config.name, pruned)
        if not released.released:
"""))),
    KnownBug("force-release-erases-run", 2,
             "release --force writes neither the stuck run's trigger nor its record", (
                 Patch("jobguard._store_operator", """\
        ttl = record_ttl_s if record_ttl_s is not None else now_ms // 1000 + 30 * 86_400
""", """\
        ttl = record_ttl_s if record_ttl_s is not None else now_ms // 1000 + 30 * 86_400
        return self._operator_release(job, lease, new_fence, now_ms, by, None, ttl,
                                      mark_trigger=False, offset_ms=offset_ms)
"""),)),
    KnownBug("paused-queue-retry-loops", 3,
             "a failed queued trigger of a paused job is retried, not recorded paused", (
                 Patch("jobguard.trigger_state", """\
        if lease.paused_at_ms is not None and not ignore_pause:
            return Next.PAUSED
        return Next.DEFER if held else Next.RUN
""", """\
        if lease.paused_at_ms is not None and not ignore_pause \\
                and state not in RETRYABLE:
            return Next.PAUSED
        return Next.DEFER if held else Next.RUN
"""),)),
    KnownBug("lost-release-forgets", 4,
             "a release recognising its own landed attempt forgets the wake receipt and "
             "follow-up", (
                 Patch("jobguard._store_release", """\
                # says so even if another run has taken and released the lease since.
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
""", """\
                # says so even if another run has taken and released the lease since.
                return Released(released=True)
"""),
                 Patch("jobguard._store_release", """\
            if state.last_run_id == run_id and state.released_by == "run":
                return Released(released=True, wake_receipt=wake, follow_up=follow_up)
""", """\
            if state.last_run_id == run_id and state.released_by == "run":
                return Released(released=True)
"""))),
    KnownBug("coalesce-undo-strands", 5,
             "a follow-up whose send failed is taken off the lease row", (
                 Patch("jobguard._guard_decisions", """\
            except StoreError:
                # The decision stands (the follow-up is named on the lease row, and the
""", """\
            except StoreError:
                from tests.explorer.known_bugs import drop_follow_up
                drop_follow_up(rt.store, trigger.job, follow_up[0])
                # The decision stands (the follow-up is named on the lease row, and the
"""),)),
    KnownBug("replace-displaced-retryable", 6,
             "REPLACE leaves the displaced trigger retryable (lost)", (
                 Patch("jobguard._store_lease", """\
            target = State.REPLACED if replace and held else State.LOST
""", """\
            target = State.LOST
"""),)),
    KnownBug("lease-lost-is-done", 7,
             "a run that lost its lease ends its trigger done, and its queue message is "
             "deleted", (
                 Patch("jobguard._guard_run", """\
                   RunStatus.LEASE_LOST: State.LOST}.get(status, State.DONE)
""", """\
                   RunStatus.LEASE_LOST: State.LOST}.get(status, State.DONE)
        if outcome is State.LOST:
            outcome = State.DONE
"""),
                 Patch("jobguard._guard_run", """\
            if route is Route.QUEUE:
                # Lease loss is not success: the message must come back and run again.
""", """\
            if False:
                # Lease loss is not success: the message must come back and run again.
"""))),
    KnownBug("queued-forgotten-early", 8,
             "a trigger on the queue is kept only dedup_window", (
                 Patch("jobguard._guard_asks", """\
        \"\"\"A trigger on the queue is kept as long as its message can be delivered.\"\"\"
""", """\
        \"\"\"A trigger on the queue is kept as long as its message can be delivered.\"\"\"
        return now_ms // 1000 + int(self.config.dedup_window.total_seconds())
"""),)),
    KnownBug("lease-row-grows", 9, "every skip leaves a mark on the lease row", (
        Patch("jobguard._store_triggers", """\
        if step is Next.SKIP:
            lease_action = self._check(lease_key, e, f"{held} AND {not_paused}")
""", """\
        if step is Next.SKIP:
            lease_action = self._update(
                lease_key, e, f"SET {e.n('t:' + record.trigger_id)} = {e.v('skipped')}",
                f"{held} AND {not_paused}")
"""),)),
    KnownBug("fence-restarts", 10,
             "a lease row without a fence starts again at 1; no high-water", (
                 Patch("jobguard._store_lease", """\
        kinds.append("fence")
""", """\
        kinds.append("fence")
        del actions[-1], kinds[-1]  # no high-water row
"""),
                 Patch("jobguard.lease", """\
    if fence is None and ever_held:
""", """\
    if False:
"""))),
    KnownBug("future-tick-runs", 11, "a far-future tick is accepted and kept only from now", (
        Patch("jobguard.guard", """\
            if ahead > config.skew_margin:
""", """\
            if False:
"""),
        Patch("jobguard._guard_asks", """\
        base_ms = now_ms
        if trigger.scheduled_at is not None:
            base_ms = max(now_ms, to_ms(trigger.scheduled_at))
""", """\
        base_ms = now_ms
"""))),
    KnownBug("garbage-message-returned", 12,
             "a trigger-queue message that is no trigger is returned to SQS (a batch item "
             "failure), not recorded: it blocks its FIFO group until the DLQ", (
                 Patch("jobguard._guard_queue", """\
        rt.telemetry.logger.warning("malformed trigger message", extra=said)
""", """\
        rt.telemetry.logger.warning("malformed trigger message", extra=said)
        raise error  # a batch item failure, redelivered to the DLQ
"""),)),
    KnownBug("link-ignores-hand-off", 13,
             "a chain's next link takes the lease without checking the hand-off: a late or "
             "repeated continuation runs over whatever holds the job (issue 30)", (
                 Patch("jobguard.trigger_state", """\
    if names_hand_off(lease, trigger) and state in (None, State.HANDED):
""", """\
    if state in (None, State.HANDED, State.LOST):
"""),
                 Patch("jobguard._store_lease", """\
            pieces.append(f"{e.n('handed_from')} = {e.v(lease.handed_from or '-')}")
""", """\
            pass  # (the decision checked the hand-off)
"""))),
)

KNOWN: dict[str, KnownBug] = {bug.name: bug for bug in _BUGS}
"""Each known bug by its name (``make explore MUTANTS=name``), in issue order."""


# -- compiling a bug's modules --------------------------------------------------------------

CO_NEWLOCALS = 0x0002  # a function's code (a class body's or a module's has not)


def _source_file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise PatchError(f"no module {module}")
    return Path(spec.origin)


def patched_source(bug: KnownBug, module: str, source: str) -> str:
    """``source`` with ``bug``'s patches on ``module`` applied; each correct text must
    occur exactly once in ``source`` (not in what an earlier patch wrote)."""
    out = source
    for patch in bug.patches:
        if patch.module != module:
            continue
        found = source.count(patch.correct)
        if found != 1:
            first = patch.correct.strip().splitlines()[0].strip()
            raise PatchError(
                f"known bug {bug.name!r}: its correct text ({first!r}...) occurs {found} "
                f"times in {module} ({_source_file(module)}), not once: lib/jobguard changed; "
                "update its patch in tests/explorer/known_bugs.py")
        out = out.replace(patch.correct, patch.buggy)
    return out


def _shape(code: CodeType, *, top: bool) -> tuple[Any, ...]:
    """What a code object does, line numbers left out. At the top (a module or a class
    body) a function's code is its qualified name only: it is compared on its own."""
    consts: list[Any] = []
    for const in code.co_consts:
        if isinstance(const, CodeType):
            if top and const.co_flags & CO_NEWLOCALS:
                consts.append(("def", const.co_qualname))
            else:
                consts.append(_shape(const, top=top))
        else:
            consts.append((type(const).__name__, const))
    return (code.co_qualname, code.co_code, code.co_names, code.co_varnames,
            code.co_freevars, code.co_cellvars, code.co_argcount, code.co_posonlyargcount,
            code.co_kwonlyargcount, code.co_flags, code.co_exceptiontable, tuple(consts))


def _functions(code: CodeType) -> dict[str, list[CodeType]]:
    """The code of every function defined at the top of a module or a class body, by
    qualified name (a function's own nested functions come with it)."""
    found: dict[str, list[CodeType]] = {}
    for const in code.co_consts:
        if not isinstance(const, CodeType):
            continue
        if const.co_flags & CO_NEWLOCALS:
            found.setdefault(const.co_qualname, []).append(const)
        else:
            for name, codes in _functions(const).items():
                found.setdefault(name, []).extend(codes)
    return found


def _live_functions(module: Any, filename: str) -> dict[str, list[FunctionType]]:
    """The module's function objects (module level, in classes, behind decorators), by
    their code's qualified name."""
    found: dict[str, list[FunctionType]] = {}
    seen: set[int] = set()

    def visit(obj: Any, depth: int = 0) -> None:
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        if isinstance(obj, FunctionType):
            if obj.__code__.co_filename == filename:
                found.setdefault(obj.__code__.co_qualname, []).append(obj)
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is not None:
                visit(wrapped, depth + 1)
        elif isinstance(obj, (staticmethod, classmethod)):
            visit(obj.__func__, depth + 1)
        elif isinstance(obj, property):
            for part in (obj.fget, obj.fset, obj.fdel):
                if part is not None:
                    visit(part, depth + 1)
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for value in vars(obj).values():
                visit(value, depth + 1)
        elif hasattr(obj, "__wrapped__") or hasattr(obj, "func"):
            inner = getattr(obj, "__wrapped__", None) or getattr(obj, "func", None)
            if isinstance(inner, FunctionType):
                visit(inner, depth + 1)

    for value in list(vars(module).values()):
        visit(value)
    return found


Swap = tuple[FunctionType, CodeType, CodeType]
"""A live function, its code now, the buggy code."""


def compile_bug(bug: KnownBug) -> list[Swap]:
    """Compile each module ``bug`` patches, under its real filename, and pair the code of
    each function the patch changed with its live function. Raises :class:`PatchError`
    (naming the bug and the module) when a patch no longer fits."""
    swaps: list[Swap] = []
    for module_name in dict.fromkeys(p.module for p in bug.patches):
        path = _source_file(module_name)
        source = path.read_text()
        buggy = patched_source(bug, module_name, source)
        where = f"known bug {bug.name!r} in {module_name}"
        try:
            before = compile(source, str(path), "exec", dont_inherit=True)
            after = compile(buggy, str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise PatchError(f"{where}: the patched source does not compile: {exc}") from exc
        if _shape(before, top=True) != _shape(after, top=True):
            raise PatchError(f"{where}: the patch changes code outside function bodies "
                             "(a default, a class attribute, a module-level statement); "
                             "only function bodies can be patched")
        old, new = _functions(before), _functions(after)
        changed = [name for name in new
                   if [_shape(c, top=False) for c in new[name]]
                   != [_shape(c, top=False) for c in old.get(name, [])]]
        if not changed:
            raise PatchError(f"{where}: the patch changes no function")
        module = importlib.import_module(module_name)
        live = _live_functions(module, str(path))
        for name in changed:
            functions = live.get(name, [])
            if len(new[name]) != 1 or len(functions) != 1:
                raise PatchError(f"{where}: {name} is defined {len(new[name])} time(s) in "
                                 f"the file and found {len(functions)} time(s) live; "
                                 "patch a function defined once")
            function = functions[0]
            if _shape(function.__code__, top=False) != _shape(old[name][0], top=False):
                raise PatchError(f"{where}: the live {name} is not its file's code (the "
                                 "file changed after it was imported)")
            swaps.append((function, function.__code__, new[name][0]))
    return swaps


# -- switching --------------------------------------------------------------------------------

_active: tuple[str, ...] = ()
_swaps: list[Swap] = []


def active() -> tuple[str, ...]:
    """The known bugs this process runs now (none unless switched)."""
    return _active


def _swap(swaps: list[Swap], *, buggy: bool) -> None:
    for function, original, bug_code in swaps:
        function.__code__ = bug_code if buggy else original


def switch_to(*names: str) -> None:
    """Run exactly these known bugs from now on in this process (none: the library as it
    is). A bad name, or a patch that no longer fits, raises and leaves the process
    running what it ran before."""
    global _active, _swaps
    unknown = [n for n in names if n not in KNOWN]
    if unknown:
        raise PatchError(f"unknown known bug(s) {unknown}: one of {sorted(KNOWN)}")
    before = _swaps
    _swap(before, buggy=False)
    try:
        swaps = [swap for name in names for swap in compile_bug(KNOWN[name])]
        targets = [id(function) for function, _, _ in swaps]
        if len(set(targets)) != len(targets):
            raise PatchError(f"known bugs {list(names)} patch the same function: run "
                             "them one at a time")
    except BaseException:
        _swap(before, buggy=True)
        raise
    _swap(swaps, buggy=True)
    _swaps, _active = swaps, tuple(names)


@contextlib.contextmanager
def only(*names: str) -> Iterator[None]:
    """Run the block with exactly these known bugs (or none), then switch back to what
    ran before."""
    saved = _active
    switch_to(*names)
    try:
        yield
    finally:
        switch_to(*saved)


def number(name: str) -> int:
    """The behaviour number (``known.BUGS``) a known bug brings back."""
    return KNOWN[name].number


if __name__ == "__main__":  # python -m tests.explorer.known_bugs: check every patch fits
    for bug in KNOWN.values():
        print(f"{bug.name:<30} #{bug.number:<2} {len(compile_bug(bug))} function(s)")
    sys.exit(0)
