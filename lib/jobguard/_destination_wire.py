"""How the destination helpers (:mod:`jobguard.destinations`) speak to AWS: a work id
as a key, a plain value as a DynamoDB attribute, an answer's error code, HTTP status and
S3 destination id, and the ``before_destination`` hook point fired before each write
(private).

Its one reason to change is the wire format of a destination call (key rules, attribute
types, what an answer holds); what each destination does with it is theirs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from botocore.exceptions import ClientError

from .hooks import active_run, fire

_S3_KEY_SAFE: Final = re.compile(r"[A-Za-z0-9!_.*'()/:@+=,-]+")
_DYNAMODB_KEY_MAX_BYTES: Final = 2048
_S3_KEY_MAX_BYTES: Final = 1024


def _before_destination(work_id: str) -> None:
    """Fire the ``before_destination`` hook point (job, run_id, work_id) right before
    the write: a drill's fault switch can pause, crash or fail the call there, and a
    test can stage a race there. Handlers never fire it themselves."""
    run = active_run()
    fire("before_destination", job=run.job if run else None,
         run_id=run.run_id if run else None, work_id=work_id)


def _check_work_id(work_id: object, *, max_bytes: int, key_safe: bool) -> str:
    """Return ``work_id`` as a destination key (``key_safe``: S3's safe characters, any
    other written ``%XX``, its UTF-8 bytes), else raise ValueError."""
    if not isinstance(work_id, str) or not work_id:
        raise ValueError(f"work_id: must be a non-empty string, got {type(work_id).__name__}")
    key = work_id
    if key_safe and not _S3_KEY_SAFE.fullmatch(work_id):
        # a work id whose source id the library escaped or hashed (it starts with '#'),
        # or a plain one with a space or a letter beyond ASCII: each other character
        # becomes %XX; '%' itself is one of them, so no two work ids share a key
        key = "".join(c if _S3_KEY_SAFE.fullmatch(c) else
                      "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
                      for c in work_id)
    if len(key.encode("utf-8")) > max_bytes:
        raise ValueError(f"work_id: must be at most {max_bytes} bytes (UTF-8) as a key")
    return key


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


# --------------------------------------------------------------------------- DynamoDB


def _attribute_value(value: Any, path: str) -> dict[str, Any]:
    """One plain Python value as a DynamoDB attribute value (floats become numbers)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):  # before int: bool is an int
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, float | Decimal):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"item: {path} is {value!r}; DynamoDB numbers must be finite")
        # repr() is the shortest string that reads back as the same float.
        number = Decimal(repr(value)) if isinstance(value, float) else value
        if not number.is_finite():
            raise ValueError(f"item: {path} is {value!r}; DynamoDB numbers must be finite")
        return {"N": str(number)}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, Mapping):
        members: dict[str, Any] = {}
        for name, member in value.items():
            if not isinstance(name, str):
                raise TypeError(f"item: {path} has a non-string key {name!r}")
            members[name] = _attribute_value(member, f"{path}.{name}")
        return {"M": members}
    if isinstance(value, list | tuple):
        return {"L": [_attribute_value(v, f"{path}[{i}]") for i, v in enumerate(value)]}
    raise TypeError(f"item: {path} has unsupported type {type(value).__name__}")



def _s3_destination_id(response: Mapping[str, Any]) -> str:
    """VersionId on a versioned bucket, else the ETag without its quotes."""
    version_id = response.get("VersionId")
    if isinstance(version_id, str) and version_id and version_id != "null":
        return version_id
    return str(response.get("ETag", "")).strip('"')
