"""JSON text that PostgreSQL's jsonb can store: payloads at enqueue, results at completion.

One check for both, so a value a handler returns is held to the rules a
payload is: JSON (no NaN, no sets), no NUL character or lone surrogate,
nested at most :data:`~jobrun.domain.rules.MAX_PAYLOAD_DEPTH` deep, within
a size limit in bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jobrun.domain.rules import MAX_PAYLOAD_DEPTH, payload_problem
from jobrun.errors import InvalidJob, PayloadTooLarge

__all__ = ["encode_payload"]

# One encoder for every payload: json.dumps with options builds a new encoder
# per call, a measurable share of a batch's per-job cost.
_PAYLOAD_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def _direct_encoder() -> Callable[[Any], str]:
    """The C encoder the JSONEncoder above builds afresh on every call, built once.

    ``JSONEncoder.encode`` makes a new C encoder object per call, which costs
    more than encoding a small payload does. ``json.encoder.c_make_encoder``
    is the stdlib's own, the one ``encode`` itself uses (its arguments
    unchanged since Python 2.7, though it is not in ``__all__``); where it is
    missing, or its output differs from the public encoder's on a probe, the
    public encoder serves instead.

    It keeps no table of circular-reference markers: a shared one would be
    left dirty by a failed encoding and is not safe across threads. A cycle
    then ends as a RecursionError, which :func:`encode_payload` reports as
    nesting too deep.
    """
    public = _PAYLOAD_ENCODER.encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return public
    chunks = make(
        None, _PAYLOAD_ENCODER.default, json.encoder.encode_basestring,
        None, ":", ",", False, False, False,
    )  # fmt: skip

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    probe = {"a": [1, 2.5, None, True, "é\n\u2028"], "b": {"c": -0.0}}
    return encode if encode(probe) == public(probe) else public


_encode = _direct_encoder()


def encode_payload(job_type: str, payload: Any, max_bytes: int, what: str = "payload") -> str:
    """Check that ``payload`` is JSON that jsonb can store, within ``max_bytes``; return its text.

    Raises InvalidJob (or PayloadTooLarge) naming the job type and, where it
    can, the place in the payload; nothing has been written when it does.
    ``what`` names the payload in those messages (a bulk enqueue gives its
    index: ``payload 3``).

    The checks that need a walk over the decoded value (:func:`payload_problem`)
    run only when the encoded text says they might find something, so a
    clean payload costs one encoding and a few scans of its text.
    """
    try:
        text = _encode(payload)
        # Strict UTF-8 fails on exactly the surrogate code points, paired or
        # lone: a Python string holding one is not text PostgreSQL can store.
        # isascii() reads a flag, so ASCII text (the usual case) skips the pass.
        size = len(text) if text.isascii() else len(text.encode())
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UnicodeEncodeError):
            raise _refused(job_type, payload, "it holds a lone surrogate", what) from None
        raise InvalidJob(f"{what} of job type {job_type!r} is not valid JSON: {exc}") from None
    except RecursionError:
        # The encoder recurses per level; the walk does not, and names the limit.
        raise _refused(job_type, payload, "it is nested too deeply", what) from None
    if size > max_bytes:
        raise PayloadTooLarge(
            f"{what} of job type {job_type!r} is {size} bytes, over the {max_bytes}-byte limit"
        )
    # The encoder writes a NUL as \u0000, and a backslash before the text u0000
    # as \\u0000, so a match only says "maybe": the walk decides. The brackets
    # bound the depth from above (brackets inside strings only add to it).
    if "\\u0000" in text or text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH:
        problem = payload_problem(payload, what)
        if problem is not None:
            raise InvalidJob(f"{what} of job type {job_type!r} is refused: {problem}")
    return text


def _refused(job_type: str, payload: Any, fallback: str, what: str) -> InvalidJob:
    problem = payload_problem(payload, what) or fallback
    return InvalidJob(f"{what} of job type {job_type!r} is refused: {problem}")
