"""JavaScript as tree-sitter sees it: parsing, positions, syntax errors, and the names a
module's statements declare, import and export.

tree-sitter indexes UTF-8 bytes; :class:`Text` turns its offsets into str indices and into
the ``line:column`` (1-based, UTF-16 columns) V8 would print.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Iterator
from typing import Final

import tree_sitter_javascript as tsjs
from tree_sitter import Language, Node, Parser, Query, QueryCursor

from .edits import Edit
from .module_map import DYNAMIC_IMPORT
from .transformed import META

_LANGUAGE: Final = Language(tsjs.language())
_QUERY: Final = Query(
    _LANGUAGE,
    """
    (call_expression function: (import) @import)
    (meta_property) @meta
    (await_expression) @await
    (for_in_statement "await" @await)
    (return_statement) @return
    """,
)
IMPORT_CALLS: Final = Query(_LANGUAGE, "(call_expression function: (import) @import)")
_local = threading.local()  # tree-sitter parsers are not shared between threads

FUNCTION_BOUNDARIES: Final = frozenset(
    {
        "function_declaration",
        "function_expression",
        "generator_function_declaration",
        "generator_function",
        "arrow_function",
        "method_definition",
        "class_body",
    }
)


def thread_parser() -> Parser:
    """This thread's tree-sitter parser (made on first use)."""
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


class Text:
    """A source with its UTF-8 bytes (what tree-sitter indexes) and JS line/column lookups."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.data = source.encode("utf-8", "surrogatepass")
        self._ascii = len(self.data) == len(source)
        self._cursor = (0, 0)  # (byte, char): decoding resumes here for ascending offsets
        self._lines: list[int] | None = None

    def char(self, byte: int) -> int:
        """The str index of a byte offset (tree-sitter speaks bytes)."""
        if self._ascii:
            return byte
        at_byte, at_char = self._cursor if byte >= self._cursor[0] else (0, 0)
        index = at_char + len(self.data[at_byte:byte].decode("utf-8", "surrogatepass"))
        self._cursor = (byte, index)
        return index

    def position(self, index: int) -> str:
        """``line:column`` (1-based, UTF-16 columns, JS line breaks) of a str index."""
        if self._lines is None:
            self._lines = [0] + [m.end() for m in re.finditer("\r\n|[\n\r\u2028\u2029]", self.source)]
        line = bisect.bisect_right(self._lines, index) - 1
        start = self._lines[line]
        column = len(self.source[start:index].encode("utf-16-le", "surrogatepass")) // 2
        return f"{line + 1}:{column + 1}"

    def node_position(self, node: Node) -> str:
        return self.position(self.char(node.start_byte))

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


class ModuleSyntaxError(Exception):
    """A problem found at transform time: becomes the module's import-time SyntaxError."""


def parse(text: Text) -> tuple[Node, str | None]:
    """The tree, and where tree-sitter saw a problem only inside a function (or None).

    tree-sitter's JavaScript grammar is looser and stricter than V8's in places (it rejects
    `() => {}` followed by a line starting with `[`), so a problem inside a function body is
    only a hint: V8 judges when it compiles the module, and its error gets this position.
    A problem at the top level, where imports and exports live, stops the transform.
    """
    root = thread_parser().parse(text.data).root_node
    hint = None
    if root.has_error:
        for node, message in _errors(text, root):
            if top_level(node):
                raise ModuleSyntaxError(message)
            hint = hint or message.split(" at ", 1)[1].split(" ", 1)[0]
    return root, hint


_SKIP_BLANKS = re.compile(rb"(?:[ \t\f\v]|/\*(?:(?!\*/)[^\n\r])*\*/)*")


def _asi(text: Text, node: Node) -> bool:
    """Whether a MISSING ';' is one JavaScript inserts itself: a line break, `}` or the end next.

    tree-sitter's scanner refuses automatic semicolons before a line that starts with `(`,
    `[` or a template (right for expressions), then recovers with MISSING ';' after
    statements such as `import x from 'y'` that JS ends there anyway.
    """
    data = text.data
    at = _SKIP_BLANKS.match(data, node.start_byte)
    rest = data[at.end() if at else node.start_byte :][:2]
    return rest[:1] in (b"", b"\n", b"\r", b"}") or rest == b"//" or rest[:2] == b"\xe2\x80"  # U+2028/9


def _errors(text: Text, root: Node) -> Iterator[tuple[Node, str]]:
    """Each ERROR/MISSING node tree-sitter left (outermost first), described as
    `Unexpected token at L:C (near 'x')` or `Expected 'x' at L:C`; MISSING semicolons that
    JavaScript inserts itself are not errors."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            if not (node.type == ";" and _asi(text, node)):
                yield node, f"Expected '{node.type}' at {text.node_position(node)}"
        elif node.is_error:
            inner = node
            while True:  # the innermost error is nearest the offending token
                nested = next((c for c in inner.children if c.is_error), None)
                if nested is None:
                    break
                inner = nested
            leaf = inner
            while leaf.child_count:
                leaf = leaf.children[-1]
            near = text.text(leaf).split("\n", 1)[0][:24]
            yield node, f"Unexpected token at {text.node_position(leaf)} (near '{near}')"
        elif node.has_error:
            stack.extend(reversed(node.children))


def top_level(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in FUNCTION_BOUNDARIES:
            return False
        parent = parent.parent
    return True


def scan(text: Text, root: Node, *, esm: bool) -> tuple[list[Edit], bool]:
    """Dynamic imports and import.meta rewritten; top-level await refused. The flag says
    whether there is a top-level `return` (illegal in ESM, allowed in CommonJS)."""
    found = QueryCursor(_QUERY).captures(root)
    returns = [node for node in found.get("return", []) if top_level(node)]
    if returns and esm:
        raise ModuleSyntaxError(f"Illegal return statement at {text.node_position(returns[0])}")
    if esm:
        for node in found.get("await", []):
            if top_level(node):
                raise ModuleSyntaxError(
                    f"Top-level await is not supported at {text.node_position(node)} "
                    "(export an async function instead)"
                )
    edits = [
        Edit(text.char(n.start_byte), text.char(n.end_byte), (DYNAMIC_IMPORT,))
        for n in found.get("import", [])
    ]
    if esm:
        metas = found.get("meta", [])
        edits += [Edit(text.char(n.start_byte), text.char(n.end_byte), (META,)) for n in metas]
    return edits, bool(returns)


_UNESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\r\n|[\s\S])")
_SIMPLE_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


def string_value(text: Text, node: Node) -> str:
    """The value of a JS string literal node (the escapes a specifier might use)."""

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        if body[0] in "ux" and len(body) > 1:
            return chr(int(body[1:].strip("{}"), 16))
        if body in ("\n", "\r", "\r\n", "\u2028", "\u2029"):
            return ""
        return _SIMPLE_ESCAPES.get(body, body)

    return _UNESCAPE.sub(one, text.text(node)[1:-1])


def name_text(text: Text, node: Node) -> str:
    """An import/export name: identifier, `default` or a string literal."""
    return string_value(text, node) if node.type == "string" else text.text(node)


def specifier_names(text: Text, node: Node) -> tuple[Node, Node]:
    """(name, alias) nodes of an import/export specifier (alias is name when absent)."""
    names = [c for c in node.children if c.type in ("identifier", "string", "default", "property_identifier")]
    return names[0], names[-1]


def bound_names(node: Node | None) -> list[Node]:
    """The identifiers a binding pattern declares."""
    if node is None:
        return []
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return [node]
    if node.type == "pair_pattern":
        return bound_names(node.child_by_field_name("value"))
    if node.type in ("object_assignment_pattern", "assignment_pattern"):
        return bound_names(node.child_by_field_name("left"))
    if node.type in ("object_pattern", "array_pattern", "rest_pattern"):
        return [n for child in node.named_children for n in bound_names(child)]
    return []


def declared_names(node: Node) -> list[Node]:
    if node.type in ("lexical_declaration", "variable_declaration"):
        return [
            n
            for d in node.named_children
            if d.type == "variable_declarator"
            for n in bound_names(d.child_by_field_name("name"))
        ]
    name = node.child_by_field_name("name")
    return [name] if name is not None else []


HOISTED: Final = frozenset({"function_declaration", "generator_function_declaration"})
DECLARATIONS: Final = frozenset({"lexical_declaration", "variable_declaration", "class_declaration"})
