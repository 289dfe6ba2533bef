"""How a command reaches AWS: the session (``--profile``, ``--region``, the local AWS's
test keys), the endpoint (``--endpoint-url``/``AWS_ENDPOINT_URL``) and the clients, as the
AWS CLI v2 takes them. Changes when the way the CLI connects changes."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from .refusal import CommandError

_REGION = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")  # botocore's own rule


def _session(args: argparse.Namespace) -> Any:
    import boto3
    from botocore.exceptions import ProfileNotFound

    if args.region is not None and not _REGION.fullmatch(args.region):
        raise CommandError("--region", f"{args.region!r} is not a region name (e.g. eu-west-1)")
    # AWS_REGION first, as the AWS CLI v2 reads it (botocore reads only
    # AWS_DEFAULT_REGION, then the profile's)
    region = args.region or os.environ.get("AWS_REGION") or None
    if region is None and args.endpoint_url and not (
            os.environ.get("AWS_DEFAULT_REGION")):
        region = "us-east-1"  # a local endpoint (make demo's local AWS) needs no choice
    try:
        session = boto3.Session(profile_name=args.profile, region_name=region)
        if args.endpoint_url and args.profile is None and session.get_credentials() is None:
            # The local AWS accepts any key; an AWS endpoint would refuse these.
            session = boto3.Session(region_name=region, aws_access_key_id="test",
                                    aws_secret_access_key="test")
        return session
    except ProfileNotFound:
        raise CommandError("--profile", f"no AWS profile {args.profile!r} in this "
                           "machine's AWS config") from None


def _endpoint(args: argparse.Namespace) -> str | None:
    from urllib.parse import urlsplit

    field = "--endpoint-url" if args.endpoint_url else "AWS_ENDPOINT_URL"
    endpoint = args.endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    if endpoint is not None:
        try:
            parts = urlsplit(endpoint)
            _ = parts.port  # a port out of range, a broken IPv6 host: ValueError
        except ValueError as exc:
            raise CommandError(field, f"{endpoint!r} is not a URL ({exc})") from None
        if (parts.scheme not in ("http", "https") or not parts.netloc
                or endpoint != endpoint.strip()):
            raise CommandError(field, f"{endpoint!r} is not an http(s) URL (e.g. "
                               "http://127.0.0.1:4566)")
    return endpoint


def _client(args: argparse.Namespace, service: str) -> Any:
    from botocore.config import Config

    endpoint = _endpoint(args)
    # Standard retry mode, as the AWS CLI v2 uses by default (boto3's own default is
    # "legacy": up to 10 attempts for DynamoDB, half a minute of backoff before an
    # operator sees a throttled call's error).
    return _session(args).client(service, endpoint_url=endpoint,
                                 config=Config(retries={"mode": "standard"}))
