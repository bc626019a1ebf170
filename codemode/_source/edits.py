"""Edits that keep every line and column: a span of source overwritten in place.

A transform blanks what it removes (line breaks kept) and writes what it adds into the
blanks, so a stack trace's ``line:column`` still points into the module as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

_LINE_BREAKS: Final = "\n\r\u2028\u2029"


@dataclass(frozen=True, slots=True)
class Edit:
    """Overwrite source[start:end] with ``tokens``, blank-padded to the same width.

    Line breaks inside the span stay where they are; the tokens fill the space between them
    in order. Only tokens that find no room grow the text (shifting the rest of one line).
    """

    start: int
    end: int
    tokens: tuple[str, ...]


def _segments(span: str) -> list[str]:
    """``span`` blanked: line breaks kept, each other UTF-16 unit a space (split on breaks)."""
    blank = "".join(ch if ch in _LINE_BREAKS else ("  " if ord(ch) > 0xFFFF else " ") for ch in span)
    return re.split("(\r\n|[\n\r\u2028\u2029])", blank)


def fill(span: str, tokens: Sequence[str]) -> tuple[str, bool]:
    """``span`` overwritten by ``tokens``; the flag says whether everything fit in place."""
    parts = _segments(span)
    content = ["" for _ in parts]
    index, fits = 0, True
    for token in tokens:
        while index < len(parts) and len(parts[index]) - len(content[index]) < len(token):
            index += 2  # odd indices hold the line breaks
        if index >= len(parts):
            index, fits = len(parts) - 1, False
            if index % 2:
                index -= 1
        content[index] += token
    out = []
    for i, part in enumerate(parts):
        out.append(part if i % 2 else content[i] + part[len(content[i]) :])
    return "".join(out), fits


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    out: list[str] = []
    at = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(source[at : edit.start])
        out.append(fill(source[edit.start : edit.end], edit.tokens)[0])
        at = edit.end
    out.append(source[at:])
    return "".join(out)
