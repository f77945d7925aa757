"""The pool's JSON loader: json.loads' results and errors, on whatever the server can send."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobrun.postgres.pool import _json_loads

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(values, st.sampled_from(["", " ", "\n", "\t "]), st.sampled_from(["", " ", "\n"]))
def test_same_value_as_json_loads(value: Any, before: str, after: str) -> None:
    for compact in (True, False):
        text = json.dumps(value, separators=(",", ":") if compact else None, ensure_ascii=False)
        data = (before + text + after).encode()
        assert _json_loads(data) == json.loads(data)


@pytest.mark.parametrize(
    "data", [b"", b" ", b"[1,2", b'{"a":1} x', b"{}{}", b"nul", b'"\\ud800', b"\xff"]
)
def test_same_error_as_json_loads(data: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(type(expected.value)):
        _json_loads(data)


def test_the_empty_object_is_a_new_dict_each_time() -> None:
    first, second = _json_loads(b"{}"), _json_loads(b"{}")
    assert first == {} and first is not second
