"""``normalize_code`` returns a ``NormalizedCode``: a str that tells a position in the program
in the text the model wrote (the executors apply it to ``Outcome.error_detail``, see
tests/contract/test_agent_contract.py)."""

from __future__ import annotations

import pickle

import pytest

from codemode import normalize_code
from codemode._outcome import Outcome, ProgramError
from codemode._positions import in_raw_text
from codemode._source.normalized import NormalizedCode


def where(text: str, needle: str, *, nth: int = 0) -> tuple[int, int]:
    """The 1-based line and column of ``needle`` (its ``nth`` occurrence) in ``text``."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("\n\n  async () => {\n  return boom.x\n}\n", "boom"),  # leading blank lines stripped
        ("Sure:\r\n```js\r\nasync () => {\r\n  return boom.x\r\n}\r\n```\r\n", "boom"),  # CR LF
        ("```javascript\nconst a = 1;\nboom.x + a\n```", "boom"),  # `return (` added
        ("```ts\nconst n: number = 2\nconst s: string = boom.x\n```", "boom"),  # types blanked
        ("export default async function main() {\n  return boom.x\n}", "boom"),  # export dropped
        ("return boom.x", "boom"),  # one line wrapped: a column shift
        ("```js\nimport {\n  a,\n  b,\n} from 'm'\nboom.x\n```", "boom"),  # lines joined
        ("if (y) {\n}\nboom.x fails, so:\n```js\nconst y = 1\nif (y) {\n}\nboom.x\n```", "boom"),
    ],
)
def test_a_position_in_the_program_is_the_same_character_in_the_raw_text(raw: str, needle: str) -> None:
    code = normalize_code(raw)
    assert isinstance(code, NormalizedCode) and code.raw == raw
    line, column = where(code, needle)
    raw_line, raw_column = where(raw.replace("\r\n", "\n"), needle, nth=raw.count(needle) - 1)
    assert code.raw_position(line, column) == (raw_line, raw_column), code


def test_a_character_the_normalizing_added_maps_to_the_raw_text_that_follows() -> None:
    code = normalize_code("const o = null; o.size")
    assert code == "async () => { const o = null; return (o.size) }"
    assert code.raw_position(1, 1) == (1, 1)  # `async () => {`: before the first raw character
    assert code.raw_position(1, code.index("(o.size") + 1) == (1, 17)  # `(`: the `o` after it


def test_the_program_stays_a_str_and_what_is_made_from_it_is_plain() -> None:
    code = normalize_code("```js\n6 * 7\n```")
    assert code == "async () => (6 * 7)" and type(str(code)) is str and type(code + "") is str
    copied = pickle.loads(pickle.dumps(code))
    assert isinstance(copied, NormalizedCode) and copied.raw == code.raw


def test_an_outcome_is_mapped_only_for_normalized_code() -> None:
    code = normalize_code("Here:\n```js\nconst a = 1;\nboom.x\n```")
    detail = ProgramError("ReferenceError", "boom is not defined", 3, 9, ("at f (program:3:9)", "at m:1:1"))
    outcome = Outcome(error=detail.message, error_detail=detail)
    mapped = in_raw_text(outcome, code).error_detail
    assert mapped is not None
    assert (mapped.line, mapped.column, mapped.stack) == (4, 1, ("at f (program:4:1)", "at m:1:1"))
    assert in_raw_text(outcome, str(code)) is outcome
    no_position = Outcome(error="x", error_detail=ProgramError("", "x"))
    assert in_raw_text(no_position, code).error_detail == ProgramError("", "x")
