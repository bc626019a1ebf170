"""``normalize_code``: turn what a model wrote into the entry form the executor runs.

The executor runs ``code`` as given: it must be one arrow or function expression, such as
``async () => { ... }``, and nothing on the way in rewrites it. Models do not reliably emit
that shape. They wrap it in a Markdown fence, lead with ``return``, write ``export default``,
answer a bare expression, declare a named function, or write a script whose last line is the
answer. ``normalize_code`` maps each of those onto the entry form, reading the program with a
real JavaScript parser (tree-sitter) so that ``return``, ``export`` or a fence that sits
inside a string, a template literal or a comment never steers it.

It is pure (no executor, no I/O) and fast: one or two parses of a few kilobytes, well under a
millisecond for typical output.

A program may be TypeScript: one in a ``ts`` fence, or one that does not parse as
JavaScript but does as TypeScript, has its types replaced by spaces (``typestrip.py``), so
every line and column of what remains is where the model wrote it.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import tree_sitter_javascript as tsjs
from tree_sitter import Language, Node, Parser

from .normalized import NormalizedCode
from .typestrip import strip_types

__all__ = ["normalize_code"]

_LANGUAGE = Language(tsjs.language())
_LOCAL = threading.local()

# Language tags (the first word of a fence's info string) that mark a JavaScript block.
# TypeScript is accepted, its types stripped: see the module docstring.
_JS_TAGS = frozenset(
    {
        "js",
        "javascript",
        "jsx",
        "mjs",
        "cjs",
        "es",
        "es6",
        "ecmascript",
        "node",
        "nodejs",
        "ts",
        "typescript",
        "tsx",
        "mts",
        "cts",
    }
)
_TS_TAGS = frozenset({"ts", "typescript", "tsx", "mts", "cts"})
_FUNCTION_TYPES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_FUNCTION_DECLARATIONS = frozenset({"function_declaration", "generator_function_declaration"})
_SKIPPED = frozenset({"comment", "hash_bang_line"})

# A fence line: up to any indentation, three or more backticks or tildes, an info string.
_OPENER = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$", re.MULTILINE)
# The language of a fence: the first word of its info string (```js title=x, ```{.js}).
_TAG = re.compile(r"^[{.\s]*([A-Za-z0-9_+#-]+)")
_DEFAULT_NAME = "__default__"
# How many closing lines a JavaScript block's end is looked for among (bounds the parses).
_CLOSING_TRIES = 4


def _parser() -> Parser:
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = Parser(_LANGUAGE)
        _LOCAL.parser = parser
    return parser


def _parse(source: bytes) -> Node:
    return _parser().parse(source).root_node


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _statements(root: Node) -> list[Node]:
    return [child for child in root.named_children if child.type not in _SKIPPED]


def _unwrap(node: Node) -> Node:
    """The expression inside any number of parentheses."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        inner = node.named_children[0]
        if inner.type == "comment":
            break
        node = inner
    return node


# ---- fences -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fence:
    tag: str
    content: str


def _inside_literal(root: Node, offset: int) -> bool:
    """Whether the byte at ``offset`` sits inside a comment or a string literal."""
    node: Node | None = root.descendant_for_byte_range(offset, offset + 1)
    while node is not None:
        if node.type in ("comment", "string", "string_fragment"):
            return True
        node = node.parent
    return False


def _closing_lines(lines: list[str], start: int, char: str, length: int) -> Iterator[int]:
    closing = re.compile(rf"^[ \t]*{re.escape(char)}{{{length},}}[ \t]*$")
    for index in range(start, len(lines)):
        if closing.match(lines[index]):
            yield index


def _is_tagged_opener(line: str) -> bool:
    match = _OPENER.match(line)
    return match is not None and bool(match.group("info").strip())


def _fences(text: str) -> list[_Fence] | None:
    """Every fenced block in ``text``, or ``None`` when the text is code, not Markdown.

    A line that looks like a fence but sits inside a comment or a string of a program that
    parses cleanly (found with the parser) is code, not a fence. The closing line of a
    JavaScript (or untagged) block is the first of its next few candidates that leaves the
    block's content parsing cleanly, so a fence-like line inside the program's own comment
    does not end it early; otherwise, and for every other language, it is the first closing
    line (CommonMark). An unclosed fence runs to the end of the text.
    """
    if not _OPENER.search(text):
        return None
    source = text.encode("utf-8", "surrogatepass")
    root = _parse(source)
    lines = text.split("\n")
    line_offsets: list[int] = []
    offset = 0
    for line in lines:
        line_offsets.append(offset)
        offset += len(line.encode("utf-8", "surrogatepass")) + 1

    live: set[int] = set()
    for index, line in enumerate(lines):
        match = _OPENER.match(line)
        if match is None:
            continue
        if match.group("fence")[0] == "`" and "`" in match.group("info"):
            continue  # an inline code span, not a fence (CommonMark)
        indent = line[: match.start("fence")].encode("utf-8", "surrogatepass")
        fence_at = line_offsets[index] + len(indent)
        # Only a program that parses cleanly can hide a fence-like line in a comment or a
        # string; in prose, a stray `/*` or quote must not swallow a real fence.
        if root.has_error or not _inside_literal(root, fence_at):
            live.add(index)
    if not live:
        return None

    blocks: list[_Fence] = []
    index = 0
    while index < len(lines):
        if index not in live:
            index += 1
            continue
        match = _OPENER.match(lines[index])
        assert match is not None
        fence = match.group("fence")
        info = match.group("info").strip()
        tag_match = _TAG.match(info)
        tag = tag_match.group(1).lower() if tag_match else ""
        candidates = list(_closing_lines(lines, index + 1, fence[0], len(fence)))
        close = len(lines)
        if candidates:
            close = candidates[0]
            tried = candidates[:_CLOSING_TRIES] if tag in _JS_TAGS or tag == "" else []
            previous = index
            for candidate in tried:
                if any(_is_tagged_opener(line) for line in lines[previous + 1 : candidate]):
                    break  # past the start of the next tagged block: not this block's end
                body = "\n".join(lines[index + 1 : candidate])
                if not _parse(body.encode("utf-8", "surrogatepass")).has_error:
                    close = candidate
                    break
                previous = candidate
        blocks.append(_Fence(tag, "\n".join(lines[index + 1 : close])))
        index = close + 1
    return blocks


def _pick(blocks: list[_Fence]) -> _Fence:
    """The first block tagged as JavaScript, else the first untagged block."""
    for block in blocks:
        if block.tag in _JS_TAGS:
            return block
    for block in blocks:
        if block.tag == "":
            return block
    tags = ", ".join(sorted({block.tag for block in blocks}))
    raise ValueError(
        f"The text holds fenced blocks only in other languages ({tags}); a program must be "
        "JavaScript in a ```js block, or bare code."
    )


# ---- the program ----------------------------------------------------------------------


def _sole_expression(code: str) -> tuple[bool, Node | None]:
    """Parse ``(code)`` the way the executor evaluates it. Returns whether it parsed cleanly,
    and the one parenthesized expression spanning the whole text (``None`` when the code is
    not one expression, e.g. ``1) || (2`` closing the parentheses itself)."""
    wrapped = ("(" + code + "\n)").encode("utf-8", "surrogatepass")
    root = _parse(wrapped)
    if root.has_error:
        return False, None
    statements = _statements(root)
    if len(statements) != 1 or statements[0].type != "expression_statement":
        return True, None
    expression = statements[0].named_children[0] if statements[0].named_child_count else None
    if (
        expression is None
        or expression.type != "parenthesized_expression"
        or expression.start_byte != 0
        or expression.end_byte != len(wrapped)
    ):
        return True, None
    return True, expression


def _entry_as_given(code: str) -> bool:
    """Whether the executor would accept ``code`` unchanged: ``(code)`` is one function."""
    parsed, expression = _sole_expression(code)
    return parsed and expression is not None and _unwrap(expression).type in _FUNCTION_TYPES


_KEPT_PROGRAMS = 128
_KEPT_PROGRAM_CHARS = 64 * 1024
"""Answers of entry_form_problem are kept for this many programs of at most this many
characters: 8 Mi characters of program text held at most (a request may carry 8 MiB of
code, and a caller may send a stream of distinct ones)."""


def entry_form_problem(code: str) -> bool:
    """Whether ``code`` parses cleanly but is not one expression: ``1) || (2`` style code
    that would close the executor's parentheses itself. (Code that does not parse at all
    is left to the engine, whose SyntaxError names the position.)

    Every run asks, before any child is involved; the answer is kept for the last 128
    programs (up to 64 Ki characters each), since a program that runs again (a retry, a loop of the
    same script over new inputs) would otherwise be parsed again, on the host's CPU, every
    run."""
    if len(code) > _KEPT_PROGRAM_CHARS:
        return _entry_form_problem(code)
    return _kept_entry_form_problem(code)


def _entry_form_problem(code: str) -> bool:
    parsed, expression = _sole_expression(code)
    return parsed and expression is None


_kept_entry_form_problem = functools.lru_cache(maxsize=_KEPT_PROGRAMS)(_entry_form_problem)


def _ends_with_comment(root: Node, source: bytes) -> bool:
    """Whether the last token is a comment (a ``//`` one would swallow a closing bracket)."""
    end = len(source.rstrip())
    if end == 0:
        return False
    node: Node | None = root.descendant_for_byte_range(end - 1, end)
    while node is not None:
        if node.type == "comment":
            return True
        node = node.parent
    return False


def _import_replacement(node: Node) -> str:
    """``import ... from 'x'`` as the dynamic ``import('x')`` a function body may hold."""
    source = node.child_by_field_name("source")
    if source is None:
        return _text(node)
    spec = _text(source)
    for child in node.named_children:
        if child.type == "import_attribute":
            attributes = [c for c in child.named_children if c.type != "comment"]
            if attributes:
                spec += ", { with: " + _text(attributes[0]) + " }"
    call = f"await import({spec})"
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    if clause is None:
        return call + ";"
    default: str | None = None
    namespace: str | None = None
    named: list[str] = []
    for part in clause.named_children:
        if part.type == "identifier":
            default = _text(part)
        elif part.type == "namespace_import":
            ids = [c for c in part.named_children if c.type == "identifier"]
            if ids:
                namespace = _text(ids[0])
        elif part.type == "named_imports":
            for spec_node in part.named_children:
                if spec_node.type != "import_specifier":
                    continue
                name = spec_node.child_by_field_name("name")
                alias = spec_node.child_by_field_name("alias")
                if name is None:
                    continue
                named.append(_text(name) if alias is None else f"{_text(name)}: {_text(alias)}")
    if default is not None:
        named.insert(0, f"default: {default}")
    if namespace is not None:
        out = f"const {namespace} = {call};"
        if named:
            out += f" const {{ {', '.join(named)} }} = {namespace};"
        return out
    if named:
        return f"const {{ {', '.join(named)} }} = {call};"
    return call + ";"


def _apply(source: bytes, edits: list[tuple[int, int, str]]) -> str:
    out = source
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        out = out[:start] + replacement.encode("utf-8", "surrogatepass") + out[end:]
    return out.decode("utf-8", "surrogatepass").strip()


def _without_semicolon(statement: Node) -> list[tuple[int, int, str]]:
    return [(c.start_byte, c.end_byte, "") for c in statement.children if c.type == ";"]


def _expression_arrow(code: str, multiline: bool) -> str:
    if multiline:
        return f"async () => (\n{code}\n)"
    return f"async () => ({code})"


def _body_arrow(body: str, multiline: bool) -> str:
    if multiline:
        return f"async () => {{\n{body}\n}}"
    return f"async () => {{ {body} }}"


def _normalize_program(code: str) -> str:
    source = code.encode("utf-8", "surrogatepass")
    root = _parse(source)
    # A program that does not parse as statements may still be an expression the executor
    # accepts (``function () {}`` is one only inside parentheses): ask the parser about the
    # exact text the executor evaluates. A clean parse is settled by the paths below.
    if root.has_error and _entry_as_given(code):
        return code
    statements = _statements(root)
    if not statements:
        raise ValueError(
            "The program holds only comments; write an arrow function such as `async () => 6 * 7`."
        )
    edits: list[tuple[int, int, str]] = [
        (c.start_byte, c.end_byte, "") for c in root.children if c.type == "hash_bang_line"
    ]
    trailing_comment = _ends_with_comment(root, source)
    multiline = "\n" in code.strip() or trailing_comment

    # One statement: the common shapes get the plainest entry form.
    if len(statements) == 1 and not root.has_error:
        only = statements[0]
        if only.type == "expression_statement" and only.named_child_count:
            expression = _unwrap(only.named_children[0])
            if expression.type in _FUNCTION_TYPES:
                return _apply(source, edits + _without_semicolon(only))
            return _expression_arrow(_apply(source, edits + _without_semicolon(only)), multiline)
        if only.type in _FUNCTION_DECLARATIONS:
            return _apply(source, edits)  # a named function expression, once parenthesized
        if only.type == "export_statement" and _is_default_export(only):
            value = only.child_by_field_name("value")
            declaration = only.child_by_field_name("declaration")
            if declaration is not None and declaration.type in _FUNCTION_DECLARATIONS:
                return _text(declaration)
            if value is not None:
                if _unwrap(value).type in _FUNCTION_TYPES:
                    return _text(value)
                return _expression_arrow(_text(value), "\n" in _text(value))

    # Anything else is a function body: statements, a leading return, top-level await,
    # imports and exports of a module.
    entry: str | None = None  # the module's default export, called or returned at the end
    entry_is_function = False
    for statement in statements:
        if statement.type == "import_statement" and not statement.has_error:
            edits.append((statement.start_byte, statement.end_byte, _import_replacement(statement)))
        elif statement.type == "export_statement" and not statement.has_error:
            found = _export_edit(statement)
            if found is not None:
                edit, name, is_function = found
                edits.append(edit)
                if name is not None:
                    entry, entry_is_function = name, is_function

    last = statements[-1]
    tail = ""
    if entry is not None:
        if entry_is_function:
            tail = f"return {entry}();"
        else:
            tail = f'return typeof {entry} === "function" ? {entry}() : {entry};'
    elif not last.has_error and last.type == "expression_statement" and last.named_child_count:
        expression = last.named_children[0]
        if _unwrap(expression).type not in _FUNCTION_TYPES:
            replacement = f"return ({_text(expression)})"
        else:
            replacement = f"return ({_text(expression)})()"
        edits.append((expression.start_byte, expression.end_byte, replacement))
    elif not last.has_error and last.type in _FUNCTION_DECLARATIONS:
        declared = last.child_by_field_name("name")
        if declared is not None:
            tail = f"return {_text(declared)}();"

    body = _apply(source, edits)
    if tail:
        if multiline:
            body = f"{body}\n{tail}"
        else:
            body = f"{body} {tail}" if body.endswith(";") else f"{body}; {tail}"
    return _body_arrow(body, multiline)


def _is_default_export(node: Node) -> bool:
    return any(child.type == "default" for child in node.children)


def _export_edit(node: Node) -> tuple[tuple[int, int, str], str | None, bool] | None:
    """The edit that turns one ``export`` statement into body code.

    Returns ``(edit, entry_name, entry_is_function)``; ``entry_name`` is set for the
    default export, which becomes the program's entry.
    """
    declaration = node.child_by_field_name("declaration")
    value = node.child_by_field_name("value")
    if _is_default_export(node):
        if declaration is not None:
            name = declaration.child_by_field_name("name")
            drop = (node.start_byte, declaration.start_byte, "")
            if name is not None:
                return drop, _text(name), declaration.type in _FUNCTION_DECLARATIONS
            return None
        if value is not None:
            is_function = _unwrap(value).type in _FUNCTION_TYPES
            replacement = f"const {_DEFAULT_NAME} = ({_text(value)});"
            return (node.start_byte, node.end_byte, replacement), _DEFAULT_NAME, is_function
        return None
    if declaration is not None:  # export const x = ..., export function f() {}
        return (node.start_byte, declaration.start_byte, ""), None, False
    # export { a, b }, export * from "x": nothing to run inside a function body.
    return (node.start_byte, node.end_byte, ""), None, False


def normalize_code(text: str) -> NormalizedCode:
    """Turn model output into the entry form: one arrow or function expression.

    The result is a :class:`NormalizedCode`, a ``str`` that keeps ``text`` as ``raw``: an
    executor given it tells an error's position (``Outcome.error_detail``) in ``text``, the
    text the model wrote, fence lines and all.

    Each form a model emits, and what it becomes::

        >>> normalize_code("async () => 6 * 7")            # already the entry form
        'async () => 6 * 7'
        >>> normalize_code("```js\\nasync () => 6 * 7\\n```")  # a fenced block
        'async () => 6 * 7'
        >>> normalize_code("return 6 * 7")                  # a leading return
        'async () => { return 6 * 7 }'
        >>> normalize_code("6 * 7")                         # a bare expression
        'async () => (6 * 7)'
        >>> normalize_code("const a = 1; a + 1")            # statements ending in an expression
        'async () => { const a = 1; return (a + 1) }'
        >>> normalize_code("async function main() { return 42 }")   # a named function
        'async function main() { return 42 }'
        >>> normalize_code("export default async () => 42")
        'async () => 42'
        >>> normalize_code("await tools.ping()")            # top-level await
        'async () => (await tools.ping())'

    A fence may sit inside prose; the first block tagged ``js``/``javascript`` (or
    ``ts``/``typescript``) wins, else the first untagged block. TypeScript (a ``ts`` block,
    or code that parses only as TypeScript) has its types replaced by spaces, every line
    and column kept::

        >>> normalize_code("const n: number = 6\\nn * 7")
        'async () => {\\nconst n         = 6\\nreturn (n * 7)\\n}'

    Only the final top-level statement, when it is an expression, becomes the return value;
    when that final statement is a function (an arrow, or a declaration after helpers), the
    function is called and its value returned. Static ``import`` declarations become
    ``await import(...)`` and ``export`` keywords are dropped; an ``export default`` is the
    entry. A named function is returned as written: the executor reads it as a function
    expression and calls it.

    Raises :class:`ValueError` when there is no program: empty or blank text, an empty
    fence, only comments, or fences only in other languages; and for TypeScript that
    cannot be stripped (an enum, a namespace with values, a parameter property, a
    decorator), naming the construct and its line. Text that is not valid
    JavaScript is not an error here: it is wrapped as well as it can be, and the executor
    reports the syntax error as the run's ``error`` for the model to read.
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize_code takes the model's text as a str, got {type(text).__name__}.")
    # JavaScript reads CR LF and CR as LF (template literals included) and a byte order
    # mark as white space, so neither changes the program's meaning.
    stripped = text.replace("\r\n", "\n").replace("\r", "\n").strip().lstrip("\ufeff").strip()
    if not stripped:
        raise ValueError(
            "There is no program to run: the text is empty. Ask the model for an arrow "
            "function such as `async () => 6 * 7`."
        )
    blocks = _fences(stripped)
    picked = None if blocks is None else _pick(blocks)
    code = stripped if picked is None else picked.content.strip()
    if not code:
        raise ValueError(
            "There is no program to run: the fenced block is empty. Ask the model for an "
            "arrow function such as `async () => 6 * 7`."
        )
    if (picked is not None and picked.tag in _TS_TAGS) or _parse(
        code.encode("utf-8", "surrogatepass")
    ).has_error:
        code = strip_types(code)
    return NormalizedCode(_normalize_program(code), text)
