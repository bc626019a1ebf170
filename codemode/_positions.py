"""Where a program failed: its line, column and own frames, read from the engine's stack.

The runtime evaluates a program as ``(`` + code + ``\\n)`` under the source URL
:data:`PROGRAM_URL`, so every frame of the program names that URL; the run's modules carry
``codemode:module/<specifier>``. Everything else on a stack (the runtime, the standard
library) is the executor's own and is left out. Positions are given in the code as the
caller passed it: the one character the wrapping puts before the first line is taken off.

A syntax error found while compiling the program has no frame of the program: its position
is where tree-sitter's JavaScript grammar first fails to read the code (the engine does not
tell the program where it stopped), which is the same place for the usual mistakes.

When the caller's code came from ``normalize_code`` (a :class:`NormalizedCode`), the host
tells the positions once more, in the text the model wrote (:func:`in_raw_text`).
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from ._outcome import Outcome, ProgramError
from ._source.module_map import SOURCE_URL_PREFIX
from ._source.normalized import NormalizedCode

__all__ = ["MAX_FRAMES", "MAX_STACK_CHARS", "PROGRAM_URL", "in_raw_text", "program_error"]

PROGRAM_URL: Final = "codemode:program"
"""The source URL the runtime evaluates a program under (see runtime.js, start)."""
MAX_FRAMES: Final = 10
"""The program's own frames a :class:`ProgramError` keeps, innermost first."""
MAX_STACK_CHARS: Final = 16_384
"""How much of an error's stack text the runtime sends (the rest is cut)."""
_WRAP_COLUMNS: Final = 1
"""Characters the runtime puts before the program's first line: ``(``."""

_ANONYMOUS_ENTRY: Final = frozenset({"eval", "async eval"})
_UNEXPECTED: Final = re.compile(r"Unexpected (?:token|identifier|string|number|keyword) '([^']+)'")
_PROGRAM_AT = re.compile(r"\bprogram:(\d+):(\d+)")
_FRAME = re.compile(r"^\s*at (?:(?P<fn>.*?) \()?(?P<url>[^\s()]+):(?P<line>\d+):(?P<column>\d+)\)?\s*$")


def _where(url: str) -> str | None:
    """How a frame's source is named in a stack: ``program``, a module's specifier, or
    None for a source that is not the caller's."""
    if url == PROGRAM_URL:
        return "program"
    if url.startswith(SOURCE_URL_PREFIX):
        return url[len(SOURCE_URL_PREFIX) :]
    return None


def program_error(name: str, message: str, stack: str, code: str, *, compiling: bool) -> ProgramError:
    """A :class:`ProgramError` from what the runtime reported: the error's ``name`` and
    ``message``, its ``stack`` text, and whether it was thrown while ``code`` was being
    compiled (a syntax error, which has no frame of the program)."""
    line: int | None = None
    column: int | None = None
    frames: list[str] = []
    for text in stack.splitlines()[1:]:
        match = _FRAME.match(text)
        if match is None:
            continue
        where = _where(match["url"])
        if where is None:
            continue
        at_line, at_column = int(match["line"]), int(match["column"])
        if where == "program" and at_line == 1:
            at_column = max(1, at_column - _WRAP_COLUMNS)
        if where == "program" and line is None:
            line, column = at_line, at_column
        if len(frames) < MAX_FRAMES:
            fn = (match["fn"] or "").strip()
            if where == "program" and fn in _ANONYMOUS_ENTRY:
                fn = ""  # (the entry function, evaluated: the engine names it after eval)
            location = f"{where}:{at_line}:{at_column}"
            frames.append(f"at {fn} ({location})" if fn else f"at {location}")
    if compiling and line is None:
        found = syntax_error_position(code, message)
        if found is not None:
            line, column = found
            frames = [f"at program:{line}:{column}"]
    return ProgramError(name=name, message=message, line=line, column=column, stack=tuple(frames))


def syntax_error_position(code: str, message: str = "") -> tuple[int, int] | None:
    """Where the syntax error in ``code`` is (1-based line and column, in characters): the
    token the engine's ``message`` names (``Unexpected token ';'``), looked for from where
    tree-sitter's JavaScript grammar first fails to read the code, or that place itself;
    the end of the code for ``Unexpected end of input``. None where tree-sitter reads it
    all."""
    if message.startswith("Unexpected end of input"):
        return _line_column(code, len(code.rstrip()))
    import tree_sitter_javascript
    from tree_sitter import Language, Node, Parser

    source = code.encode("utf-8", "surrogatepass")
    root = Parser(Language(tree_sitter_javascript.language())).parse(source).root_node
    if not root.has_error:
        return None

    def first(node: Node) -> Node | None:
        if node.is_error or node.is_missing:
            return node
        for child in node.children:
            if child.has_error or child.is_missing:
                found = first(child)
                if found is not None:
                    return found
        return None

    node = first(root)
    if node is None:
        return None
    start = len(source[: node.start_byte].decode("utf-8", "surrogatepass"))
    named = _UNEXPECTED.match(message)
    if named is not None:
        found = code.find(named[1], start)
        if found >= 0:
            start = found
    return _line_column(code, start)


def _line_column(code: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of the character at ``offset``."""
    line_start = code.rfind("\n", 0, offset) + 1
    return code.count("\n", 0, offset) + 1, offset - line_start + 1


def in_raw_text(outcome: Outcome, code: str) -> Outcome:
    """``outcome`` with its error's line, column and program frames told in the text the
    model wrote, when ``code`` is a :class:`NormalizedCode`; otherwise as it is."""
    detail = outcome.error_detail
    if detail is None or not isinstance(code, NormalizedCode):
        return outcome
    line, column = detail.line, detail.column
    if line is not None and column is not None:
        line, column = code.raw_position(line, column)

    def frame(match: re.Match[str]) -> str:
        at_line, at_column = code.raw_position(int(match[1]), int(match[2]))
        return f"program:{at_line}:{at_column}"

    stack = tuple(_PROGRAM_AT.sub(frame, text) for text in detail.stack)
    mapped = msgspec.structs.replace(detail, line=line, column=column, stack=stack)
    return msgspec.structs.replace(outcome, error_detail=mapped)
