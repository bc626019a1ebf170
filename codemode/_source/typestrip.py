"""TypeScript to JavaScript by blanking the types: what ``normalize_code`` does to a program
a model wrote in TypeScript.

The program is read with tree-sitter's TypeScript grammar, and every part that exists only
for the type checker is replaced by spaces (line breaks kept), so each remaining character
stays on its line and column: type annotations, interfaces, type aliases, ``declare``,
overload signatures, generics (on declarations and calls), ``as`` and ``satisfies``,
non-null ``!``, optional ``?`` marks, ``implements``, ``import type``, member modifiers
(``private``, ``readonly``, ``abstract``, ...), and namespaces that hold only types.

What has a runtime meaning of its own cannot be blanked (enums, namespaces with values,
parameter properties, decorators): it is refused with one sentence naming the construct
and its line, as a ValueError, for the model to rewrite.
"""

from __future__ import annotations

import re
import threading

import tree_sitter_typescript as tsts
from tree_sitter import Language, Node, Parser

__all__ = ["has_type_syntax", "strip_types"]

_LANGUAGE = Language(tsts.language_typescript())
_LOCAL = threading.local()

_WHOLE = frozenset(
    {
        "type_annotation",
        "type_predicate_annotation",
        "asserts_annotation",
        "omitting_type_annotation",
        "opting_type_annotation",
        "type_parameters",
        "type_arguments",
        "interface_declaration",
        "type_alias_declaration",
        "ambient_declaration",
        "function_signature",
        "abstract_method_signature",
        "implements_clause",
        "index_signature",
    }
)
"""Nodes that are types from end to end."""

_MARKS = {
    "optional_parameter": {"?"},
    "public_field_definition": {"?", "!", "readonly", "override", "declare", "abstract"},
    "method_definition": {"?", "override", "abstract"},
    "variable_declarator": {"!"},
    "abstract_class_declaration": {"abstract"},
    "abstract_class": {"abstract"},
}
"""Tokens that are types inside a node whose rest is JavaScript."""

_TAIL_FROM = {"as_expression": "as", "satisfies_expression": "satisfies"}
"""Expressions whose type follows a keyword: blanked from the keyword to their end."""

_TYPE_ONLY_STATEMENTS = frozenset({"interface_declaration", "type_alias_declaration", "ambient_declaration"})

_REFUSED = {
    "enum_declaration": ("an enum", "use an object of constants instead"),
    "decorator": ("a decorator", "call the function on the class or method yourself"),
}
_LINE_BREAKS = re.compile(r"[^\n\u2028\u2029]")


def _parser() -> Parser:
    parser: Parser | None = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = Parser(_LANGUAGE)
        _LOCAL.parser = parser
    return parser


def _refuse(construct: str, node: Node, hint: str) -> ValueError:
    return ValueError(
        f"The program uses {construct} on line {node.start_point.row + 1}, a TypeScript "
        f"construct that does something at run time and so cannot be stripped to JavaScript; {hint}."
    )


def _type_only(statement: Node) -> bool:
    if statement.type in _TYPE_ONLY_STATEMENTS or statement.type in ("comment", "empty_statement"):
        return True
    if statement.type == "export_statement":
        declaration = statement.child_by_field_name("declaration")
        return declaration is not None and _type_only(declaration)
    if statement.type in ("internal_module", "module", "expression_statement"):
        return all(_type_only(child) for child in _module_statements(statement))
    return False


def _module_statements(node: Node) -> list[Node]:
    if node.type == "expression_statement":
        return [c for c in node.named_children]
    body = node.child_by_field_name("body")
    return [] if body is None else [c for c in body.named_children]


class _Blanks:
    """The byte ranges to blank, gathered from one walk of the tree."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def node(self, node: Node) -> None:
        self.ranges.append((node.start_byte, node.end_byte))

    def walk(self, node: Node) -> None:
        kind = node.type
        if kind in _REFUSED:
            construct, hint = _REFUSED[kind]
            raise _refuse(construct, node, hint)
        if kind in _WHOLE:
            self.node(node)
            return
        if kind in ("internal_module", "module"):
            if not _type_only(node):
                raise _refuse("a namespace with values", node, "use an object or plain declarations instead")
            self.node(node)
            return
        if kind in ("import_statement", "export_statement") and any(c.type == "type" for c in node.children):
            self.node(node)  # import type { X } from 'y'; export type { X }
            return
        if kind == "export_statement":
            declaration = node.child_by_field_name("declaration")
            if declaration is not None and _type_only(declaration):
                self.node(node)
                return
        if kind in ("required_parameter", "optional_parameter") and any(
            c.type in ("accessibility_modifier", "readonly", "override_modifier") for c in node.children
        ):
            raise _refuse(
                "a parameter property",
                node,
                "declare the field in the class body and assign it in the constructor",
            )
        if kind in ("accessibility_modifier", "override_modifier"):
            self.node(node)
            return
        marks = _MARKS.get(kind)
        tail = _TAIL_FROM.get(kind)
        for child in node.children:
            if marks is not None and not child.is_named and child.type in marks:
                self.node(child)
            elif tail is not None and child.type == tail:
                self.ranges.append((child.start_byte, node.end_byte))
                return
            elif kind == "non_null_expression" and child.type == "!":
                self.node(child)
            else:
                self.walk(child)


def _parse(source: bytes) -> Node:
    return _parser().parse(source).root_node


def has_type_syntax(code: str) -> bool:
    """Whether ``code`` parses cleanly as TypeScript (and so can be stripped)."""
    return not _parse(code.encode("utf-8", "surrogatepass")).has_error


def strip_types(code: str) -> str:
    """``code`` with its TypeScript-only parts replaced by spaces (line breaks kept), so
    every other character keeps its line and column. Code that does not parse as
    TypeScript is returned unchanged. Raises ValueError naming a construct that has a
    runtime meaning of its own (an enum, a namespace with values, a parameter property, a
    decorator) and its line."""
    source = code.encode("utf-8", "surrogatepass")
    root = _parse(source)
    if root.has_error:
        return code
    blanks = _Blanks()
    blanks.walk(root)
    if not blanks.ranges:
        return code
    out: list[bytes] = []
    position = 0
    for start, end in sorted(blanks.ranges):
        if end <= position:
            continue
        start = max(start, position)
        out.append(source[position:start])
        removed = source[start:end].decode("utf-8", "surrogatepass")
        out.append(_LINE_BREAKS.sub(" ", removed).encode("utf-8"))
        position = end
    out.append(source[position:])
    return b"".join(out).decode("utf-8", "surrogatepass")
