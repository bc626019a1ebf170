"""``NormalizedCode``: what ``normalize_code`` returns, a ``str`` that remembers the text the
model wrote, so a position in the program can be told in that text.

Normalizing keeps the program's own characters and only adds or drops what surrounds them
(a fence and the prose around it, leading blank lines, the ``async () => {`` wrapping, a
``return (`` before the last expression, an ``export default``, TypeScript types blanked in
place). So a position is found again by alignment, computed only when asked (an error with a
position): when the program is a piece of the raw text, as it is for a fenced block or code
that needed no change, by where that piece starts; otherwise line by line
(``difflib.SequenceMatcher`` over the lines, then over the characters of the one line).

Only the ``NormalizedCode`` object itself carries the raw text: anything derived from it
(``code + "..."``, ``str(code)``) is a plain ``str``, and a plain ``str`` is never mapped.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

__all__ = ["NormalizedCode"]

_NEWLINES: Final = re.compile(r"\r\n?")
_CANDIDATE_LINES: Final = 64
"""How many raw lines a changed program line is compared with, at most, to find its own."""


class NormalizedCode(str):
    """A normalized program (a ``str``) and ``raw``, the text it came from.

    ``raw_position(line, column)`` turns a 1-based position in the program into the same
    place in ``raw``; the executors apply it to ``Outcome.error_detail`` when the code they
    were given is a ``NormalizedCode``.
    """

    raw: str

    def __new__(cls, code: str, raw: str) -> NormalizedCode:
        made = super().__new__(cls, code)
        made.raw = raw
        return made

    def __reduce__(self) -> tuple[type[NormalizedCode], tuple[str, str]]:
        return NormalizedCode, (str(self), self.raw)

    def raw_position(self, line: int, column: int) -> tuple[int, int]:
        """The 1-based ``(line, column)`` in ``raw`` of the character at 1-based ``(line,
        column)`` of this program. A character the normalizing added (the wrapping) maps to
        the raw character that follows it on its line."""
        raw = _NEWLINES.sub("\n", self.raw)
        code = str(self)
        start = raw.find(code) if code else -1
        if start >= 0:
            first_line = raw.count("\n", 0, start)
            first_column = start - (raw.rfind("\n", 0, start) + 1)
            return line + first_line, column + (first_column if line == 1 else 0)
        return _aligned(code.split("\n"), raw.split("\n"), line - 1, column - 1)


def _aligned(lines: list[str], raw_lines: list[str], index: int, column: int) -> tuple[int, int]:
    """Line ``index``, column ``column`` (0-based) of ``lines``, found in ``raw_lines``."""
    if not 0 <= index < len(lines):
        return index + 1, column + 1
    matcher = difflib.SequenceMatcher(None, lines, raw_lines)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if not i1 <= index < i2:
            continue
        if tag == "equal":
            return j1 + index - i1 + 1, column + 1
        if j1 == j2:  # a line the normalizing added: the raw line that follows it
            return min(j1, len(raw_lines) - 1) + 1, 1
        text = lines[index]
        nearest = min(j1 + index - i1, j2 - 1)
        candidates = range(max(j1, nearest - _CANDIDATE_LINES), min(j2, nearest + _CANDIDATE_LINES + 1))
        best = max(candidates, key=lambda j: (_shared(text, raw_lines[j]), -abs(j - nearest)))
        return best + 1, _column(text, raw_lines[best], column) + 1
    return index + 1, column + 1


def _shared(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` have in common, in order."""
    return sum(
        block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()
    )


def _column(text: str, raw_text: str, column: int) -> int:
    """Column ``column`` of ``text``, found in ``raw_text`` (0-based)."""
    blocks = difflib.SequenceMatcher(None, text, raw_text, autojunk=False).get_matching_blocks()
    for block in blocks:
        if column < block.a:
            return block.b  # an added character: where the raw text goes on
        if column < block.a + block.size:
            return block.b + column - block.a
    return len(raw_text)
