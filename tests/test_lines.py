"""The child's reading of the runtime's message lines (codemode/_child/lines.py): msgspec
reads what it can, and every line reads as the stdlib's ``json.loads`` reads it."""

from __future__ import annotations

import json

import pytest

from codemode._child.lines import decode_lines

LINES = [
    '["c",1,"store","get","[{\\"i\\":3}]"]',
    '["l","log","caf\\u00e9 \\ud83d\\ude00"]',
    '["e","Error","half a pair: \\ud800"]',  # msgspec refuses a lone surrogate's escape
    '["r",123456789012345678901234567890]',
    '["n",NaN]',  # not JSON, but what json.loads has always read
    '["x",1e400]',
]


def test_every_line_reads_as_the_stdlib_reads_it() -> None:
    text = "\n".join(LINES) + "\n"
    decoded = decode_lines(text)
    expected = [json.loads(line) for line in LINES]
    assert repr(decoded) == repr(expected)  # (repr: NaN is not equal to itself)
    assert decoded[2][2].endswith("\ud800")


def test_a_line_neither_reads_raises() -> None:
    with pytest.raises(ValueError):
        decode_lines('["c",1]\n["c",\n')


def test_only_messages_of_a_known_shape_are_acted_on() -> None:
    """A program that tampers with its runtime can write any line: the child acts only on
    lists whose tag it knows, with that tag's count and types of fields (no booleans)."""
    from codemode._child.lines import well_shaped as _well_shaped

    assert _well_shaped(["c", 1, "store", "get", "[]"])
    assert _well_shaped(["d", None]) and _well_shaped(["d", "42"])
    assert _well_shaped(["h"])
    for bad in (
        ["c", True, "store", "get", "[]"],  # a boolean is not a call id
        ["c", 1, "store", "get"],  # a field short
        ["c", 1, "store", "get", "[]", "extra"],
        ["c", "1", "store", "get", "[]"],
        ["c", 1.5, "store", "get", "[]"],  # nor is a float
        [["c"], 1, "store", "get", "[]"],  # a tag that is not a string (nor hashable)
        ["l", "log", None],
        ["d", 42],
        ["zz", 1],
        [],
        [7, 1],
        {"c": 1},
        "c",
    ):
        assert not _well_shaped(bad), bad
