"""How a command ends: its exit status, and one line on stderr for each way it can fail
(refused, AWS failed, no credentials or region, an extra not installed, the reader gone),
a crash's traceback with every message one safe line. Changes when an exit status or a
failure's line changes."""

from __future__ import annotations

import argparse
import os
import sys

from .._safe_text import safe_text
from .refusal import CommandError


def _crash(exc: BaseException) -> None:
    """A command's crash on stderr, while the stream still escapes: its traceback, each
    exception's message one safe line (it may quote a record or a remote API's answer;
    Python would print it after ``safe_streams`` restored the raw stream)."""
    import traceback

    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__
                                        else current.__context__)
    for index, one in enumerate(reversed(chain)):
        if index:  # Python's own words between the exceptions of a chain
            print("\nThe above exception was the direct cause of the following exception:\n"
                  if one.__cause__ is not None else "\nDuring handling of the above "
                  "exception, another exception occurred:\n", file=sys.stderr)
        said = "".join(traceback.format_exception_only(type(one), one)).rstrip("\n")
        print("Traceback (most recent call last):\n"
              + "".join(traceback.format_tb(one.__traceback__)) + safe_text(said),
              file=sys.stderr)


def _error(text: object) -> None:
    """An ``error: ...`` line on stderr: one line, whatever the text quotes."""
    print(f"error: {safe_text(text)}", file=sys.stderr)


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command (``args.run``); its exit status, every failure it can say
    said as one ``error:`` line. A failure it cannot say (a bug) is raised, for
    :func:`_crash`."""
    try:
        code: int = args.run(args)
        sys.stdout.flush()
    except CommandError as exc:
        _error(exc)
        return exc.code
    except BrokenPipeError:
        # the reader stopped early (`| head`): not an error; keep Python's exit quiet
        import contextlib

        # not a real file (a test's capture): nothing left to flush
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        extra = {"moto": "local", "aws_cdk": "cdk", "constructs": "cdk",
                 "cdk_nag": "cdk"}.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        _error(f"{args.command}: needs {exc.name}, which comes with "
               f"pip install 'jobguard[{extra}]'")
        return 2
    except Exception as exc:  # noqa: BLE001 - a command's failure, said plainly
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
            NoRegionError,
            PartialCredentialsError,
        )

        from ..errors import JobGuardError

        if isinstance(exc, ClientError) and exc.response.get("Error", {}).get(
                "Code") == "ResourceNotFoundException" and exc.operation_name not in (
                "Invoke", "DescribeStacks"):
            where = getattr(args, "endpoint_url", None) or os.environ.get("AWS_ENDPOINT_URL")
            table = getattr(args, "resolved_table", None)
            _error(f"{args.command}: AWS said a resource does not exist ({exc}); "
                   f"is the table {table!r} deployed in this account and region"
                   + (f" at {where}" if where else "") + "?")
            return 1
        if isinstance(exc, NoCredentialsError | PartialCredentialsError):
            _error(f"--profile: {args.command}: no AWS credentials found ({exc}): pass "
                   "--profile (or set AWS_PROFILE), or set AWS_ACCESS_KEY_ID and "
                   "AWS_SECRET_ACCESS_KEY; for the local AWS, pass --endpoint-url (or set "
                   "AWS_ENDPOINT_URL)")
            return 2
        if isinstance(exc, NoRegionError):
            _error(f"--region: {args.command}: no AWS region: pass --region (or set "
                   "AWS_REGION), or give the profile one; for the local AWS, pass "
                   "--endpoint-url (or set AWS_ENDPOINT_URL)")
            return 2
        if isinstance(exc, ClientError | BotoCoreError):
            # AWS failed (throttled, 5xx, unreachable): say which call, change nothing.
            _error(f"{args.command}: AWS call failed: {exc}")
            return 1
        if not isinstance(exc, JobGuardError):
            raise
        said = str(exc)
        if "Requested resource not found" in said or "ResourceNotFoundException" in said:
            table = getattr(args, "resolved_table", None)
            said += (f" (table {table!r}: is it deployed in this account and region, and "
                     "is --stack, --table, JOBGUARD_TABLE or JOBGUARD_STACK right?)")
        _error(said)
        return 1
    return code
