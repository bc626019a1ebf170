"""A canvas job made from ``normalize_code``'s output: the program travels as plain text
(its ``NormalizedCode`` is a str subclass, which msgspec does not encode)."""

from __future__ import annotations

from codemode import normalize_code
from codemode.fleet.canvas import run_signature


def test_normalized_code_makes_a_job_whose_code_is_plain_text() -> None:
    sig = run_signature(normalize_code("```js\n6 * 7\n```"))
    assert sig.kwargs["code"] == "async () => (6 * 7)"
    assert type(sig.kwargs["code"]) is str
