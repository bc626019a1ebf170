"""The CommonJS transform: a module that runs sloppy, with ``this`` = ``module.exports``, in
a wrapper whose parameters are ``module, exports, require``.

The wrapper declares the module's top-level ``var`` names, so sloppy eval adds nothing
dynamic to it. A module with a top-level ``return`` is compiled as that function instead
(its first line's columns move by the header).
"""

from __future__ import annotations

from tree_sitter import Node

from .edits import Edit, apply_edits
from .module_map import DYNAMIC_IMPORT
from .syntax import FUNCTION_BOUNDARIES, HOISTED, Text, bound_names, declared_names, parse, scan
from .transformed import TransformedModule, source_url, wrapper_factory


def transform_cjs(specifier: str, source: str) -> TransformedModule:
    """The loader's view of one CommonJS module (raises ModuleSyntaxError at the top level)."""
    text = Text(source)
    root, hint = parse(text)
    edits, returns = scan(text, root, esm=False)
    if returns:
        # Only a function body may `return`: this module is compiled as one, which moves the
        # columns of its first line (and only those) by the width of the header.
        edits += [
            Edit(text.char(n.start_byte), text.char(n.end_byte), ())
            for n in root.named_children
            if n.type == "hash_bang_line"
        ]
        head = f"(function (module, exports, require, {DYNAMIC_IMPORT}) {{"
        code = head + apply_edits(source, edits) + "\n})" + source_url(specifier)
        return TransformedModule(specifier, "cjs", code, hint=hint)
    code = apply_edits(source, edits)
    names = [n for n in dict.fromkeys(_hoisted_vars(text, root)) if n not in ("eval", "arguments")]
    declare = f"var {', '.join(names)}; " if names else ""
    wrapper = wrapper_factory(
        f"function (module, exports, require, {DYNAMIC_IMPORT}, __cmiSrc) "
        f"{{ {declare}return eval(__cmiSrc); }}"
    )
    return TransformedModule(specifier, "cjs", code + source_url(specifier), wrapper=wrapper, hint=hint)


def _hoisted_vars(text: Text, root: Node) -> list[str]:
    """Every name sloppy code hoists to its top level: `var`s and function declarations
    outside functions (Annex B hoists those in blocks too)."""
    names: list[str] = []
    stack = list(root.named_children)
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "variable_declaration":
            names += [text.text(n) for n in declared_names(node)]
        elif kind == "for_in_statement" and any(c.type == "var" for c in node.children):
            names += [text.text(n) for n in bound_names(node.child_by_field_name("left"))]
        elif kind in HOISTED:
            names += [text.text(n) for n in declared_names(node)]
            continue
        if kind not in FUNCTION_BOUNDARIES and kind != "class_declaration" and kind != "class":
            stack.extend(node.named_children)
    return names
