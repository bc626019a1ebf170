"""The ES module transform: import and export statements overwritten in place, the tables
the loader links with, and the wrapper the module's source is evaluated in.

An ESM module's imports are ``let`` bindings of its wrapper. The loader writes them when
the module starts, again once its dependencies have run, after each exported declaration
of the exporting module runs, and when the exporting module finishes: a cycle sees a
binding once it is initialised. ``export default <expr>`` becomes ``__cmi_d=<expr>``, an
anonymous ``export default function`` becomes ``function __cmi_f``. A hoisted function
``__cmi_`` appended after the last line hands the loader a reader of the module's exported
bindings; a call ``__cmi_();`` placed in the blank left by the first import registers that
reader and evaluates the dependencies before the body, which is what makes cycles behave as
in JS. ``;__cmiU("x")`` after an exported declaration (on its last line, so at most the rest
of that line moves) tells the loader the binding is initialised.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from .edits import Edit, apply_edits, fill
from .module_map import DYNAMIC_IMPORT
from .syntax import (
    DECLARATIONS,
    HOISTED,
    ModuleSyntaxError,
    Text,
    declared_names,
    name_text,
    parse,
    scan,
    specifier_names,
    string_value,
)
from .transformed import (
    ANON_DEFAULT,
    DEFAULT_LOCAL,
    DEFAULT_SLOT,
    PREFIX,
    TransformedModule,
    source_url,
    wrapper_factory,
)


@dataclass
class _Esm:
    """The tables one ESM transform collects."""

    text: Text
    edits: list[Edit] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)
    imports: list[tuple[str, str, str, str]] = field(default_factory=list)
    exports: list[tuple[str, str]] = field(default_factory=list)
    indirect: list[tuple[str, str, str, str]] = field(default_factory=list)
    stars: list[str] = field(default_factory=list)
    anon_default: bool = False
    local_exports: list[tuple[str, Node, Node]] = field(default_factory=list)  # (exported, local, at)
    declared: dict[str, str] = field(default_factory=dict)  # name -> "import" | "declaration"
    exported_at: dict[str, Node] = field(default_factory=dict)
    # (edit index or None, statement, runs) for each top-level statement, to place the prefix
    statements: list[tuple[int | None, Node, bool]] = field(default_factory=list)
    # (statement, names it declares) for top-level let/const/var/class declarations
    declarations: list[tuple[Node, list[str]]] = field(default_factory=list)

    def span(self, start: Node, end_byte: int, tokens: tuple[str, ...]) -> int:
        text = self.text
        self.edits.append(Edit(text.char(start.start_byte), text.char(end_byte), tokens))
        return len(self.edits) - 1

    def dep(self, node: Node) -> str:
        spec = string_value(self.text, node)
        if spec not in self.deps:
            self.deps.append(spec)
        return spec

    def export_name(self, name: str, at: Node) -> None:
        if name in self.exported_at:
            raise ModuleSyntaxError(f"Duplicate export of '{name}' at {self.text.node_position(at)}")
        self.exported_at[name] = at

    def declare(self, node: Node, kind: str = "declaration") -> None:
        """Record a top-level name; an import may share its name with nothing else."""
        name = self.text.text(node)
        if self.declared.get(name) == "import" or (kind == "import" and name in self.declared):
            raise ModuleSyntaxError(
                f"Identifier '{name}' has already been declared at {self.text.node_position(node)}"
            )
        self.declared.setdefault(name, kind)


def transform_esm(specifier: str, source: str) -> TransformedModule:
    """The loader's view of one ES module (raises ModuleSyntaxError at the top level)."""
    text = Text(source)
    root, hint = parse(text)
    esm = _Esm(text)
    esm.edits.extend(scan(text, root, esm=True)[0])
    import_locals: dict[str, tuple[str, str]] = {}
    for stmt in root.named_children:
        if stmt.type == "import_statement":
            _import_statement(esm, stmt, import_locals)
        elif stmt.type == "export_statement":
            _export_statement(esm, stmt)
        else:
            if stmt.type in DECLARATIONS or stmt.type in HOISTED:
                for name in declared_names(stmt):
                    esm.declare(name)
            if stmt.type in DECLARATIONS:
                esm.declarations.append((stmt, [text.text(n) for n in declared_names(stmt)]))
            executable = not (
                stmt.type in HOISTED
                or stmt.type in ("comment", "hash_bang_line", "empty_statement")
                or (stmt.type == "expression_statement" and stmt.named_children[0].type == "string")
            )
            esm.statements.append((None, stmt, executable))
    for exported, local_node, at in esm.local_exports:
        local = text.text(local_node)
        if local in import_locals:  # `import {a} from 'x'; export {a}` re-exports x's binding
            spec, imported = import_locals[local]
            esm.indirect.append((exported, spec, imported, text.node_position(at)))
        else:
            esm.exports.append((exported, local))
    _notify_after_declarations(esm)
    placed = _place_prefix(esm)
    code = apply_edits(source, esm.edits)
    locals_ = list(dict.fromkeys(local for local, *_ in esm.imports))
    return TransformedModule(
        specifier,
        "esm",
        code + _tail(esm, placed) + source_url(specifier),
        wrapper=_esm_wrapper(locals_),
        hint=hint,
        deps=tuple(esm.deps),
        imports=tuple(esm.imports),
        exports=tuple(esm.exports),
        indirect=tuple(esm.indirect),
        stars=tuple(esm.stars),
        anon_default=esm.anon_default,
    )


def _import_statement(esm: _Esm, stmt: Node, import_locals: dict[str, tuple[str, str]]) -> None:
    text = esm.text
    source = stmt.child_by_field_name("source")
    assert source is not None
    spec = esm.dep(source)
    at = text.node_position(source)
    clause = next((c for c in stmt.named_children if c.type == "import_clause"), None)
    bindings: list[tuple[Node, str]] = []
    for part in clause.named_children if clause is not None else []:
        if part.type == "identifier":
            bindings.append((part, "default"))
        elif part.type == "namespace_import":
            bindings.append((part.named_children[0], "*"))
        elif part.type == "named_imports":
            for item in part.named_children:
                if item.type == "import_specifier":
                    name, alias = specifier_names(text, item)
                    bindings.append((alias, name_text(text, name)))
    for local_node, imported in bindings:
        local = text.text(local_node)
        esm.declare(local_node, "import")
        import_locals[local] = (spec, imported)
        esm.imports.append((local, spec, imported, at))
    esm.statements.append((esm.span(stmt, stmt.end_byte, (";",)), stmt, False))


def _export_statement(esm: _Esm, stmt: Node) -> None:
    text = esm.text
    source = stmt.child_by_field_name("source")
    declaration = stmt.child_by_field_name("declaration")
    value = stmt.child_by_field_name("value")
    is_default = any(c.type == "default" for c in stmt.children)
    if source is not None:
        spec = esm.dep(source)
        at = text.node_position(source)
        clause = next((c for c in stmt.named_children if c.type == "export_clause"), None)
        namespace = next((c for c in stmt.named_children if c.type == "namespace_export"), None)
        if namespace is not None:
            name_node = namespace.named_children[0]
            esm.export_name(name_text(text, name_node), name_node)
            esm.indirect.append((name_text(text, name_node), spec, "*", at))
        elif clause is not None:
            for item in clause.named_children:
                if item.type != "export_specifier":
                    continue
                name, alias = specifier_names(text, item)
                esm.export_name(name_text(text, alias), alias)
                esm.indirect.append((name_text(text, alias), spec, name_text(text, name), at))
        elif spec not in esm.stars:
            esm.stars.append(spec)
        esm.statements.append((esm.span(stmt, stmt.end_byte, (";",)), stmt, False))
    elif declaration is not None:
        names = declared_names(declaration)
        for node in names:
            esm.declare(node)
            if not is_default:
                esm.export_name(text.text(node), node)
                esm.local_exports.append((text.text(node), node, node))
        if is_default:
            esm.export_name("default", stmt)
            esm.exports.append(("default", text.text(names[0])))
        if declaration.type in DECLARATIONS:
            esm.declarations.append((stmt, [text.text(n) for n in names]))
        index = esm.span(stmt, declaration.start_byte, (";",))
        esm.statements.append((index, stmt, declaration.type not in HOISTED))
    elif value is not None:
        esm.export_name("default", stmt)
        params = value.child_by_field_name("parameters")
        if value.type in ("function_expression", "generator_function") and params is not None:
            # An anonymous default function is a hoisted declaration in JS: give it a name.
            words = [text.text(c) for c in value.children if c.type in ("async", "function", "*")]
            head = " ".join(w for w in words if w != "*") + ("*" if "*" in words else "")
            esm.anon_default = True
            esm.exports.append(("default", ANON_DEFAULT))
            index = esm.span(stmt, params.start_byte, (";", f"{head} {ANON_DEFAULT}"))
            esm.statements.append((index, stmt, False))
        else:
            esm.exports.append(("default", DEFAULT_LOCAL))
            esm.declarations.append((stmt, [DEFAULT_LOCAL]))
            index = esm.span(stmt, value.start_byte, (";", DEFAULT_SLOT))
            esm.statements.append((index, stmt, True))
    else:  # export { a as b }
        clause = next((c for c in stmt.named_children if c.type == "export_clause"), None)
        for item in clause.named_children if clause is not None else []:
            if item.type != "export_specifier":
                continue
            name, alias = specifier_names(text, item)
            exported = name_text(text, alias)
            esm.export_name(exported, alias)
            esm.local_exports.append((exported, name, item))
        esm.statements.append((esm.span(stmt, stmt.end_byte, (";",)), stmt, False))


def _place_prefix(esm: _Esm) -> bool:
    """Put ``__cmi_();`` before the first statement that runs; False leaves it to the tail.

    Only a module with dependencies needs it early (so a cycle sees hoisted functions and
    dependencies run first). It goes into the first blank an import/export left before that
    statement with room on one line; failing that, into the statement's own `export ` blank or
    in front of it (the one case where the rest of a line shifts, by at most nine columns).
    With no statement that runs, the tail's call is early enough.
    """
    if not esm.deps:
        return False
    source = esm.text.source
    for index, stmt, executable in esm.statements:
        if index is not None:
            edit = esm.edits[index]
            tokens = (PREFIX, *edit.tokens[1:])
            if fill(source[edit.start : edit.end], tokens)[1] or executable:
                esm.edits[index] = Edit(edit.start, edit.end, tokens)
                return True
        elif executable:
            start = esm.text.char(stmt.start_byte)
            esm.edits.append(Edit(start, start, (PREFIX,)))
            return True
    return False


def _notify_after_declarations(esm: _Esm) -> None:
    """``;__cmiU("a")`` after each top-level declaration of an exported binding.

    Inserted at the end of the statement's last line, so only code after it on that line
    moves; it lets a module in a cycle see the binding as soon as it is initialised.
    """
    exported = {local for _, local in esm.exports}
    for stmt, names in esm.declarations:
        hits = [name for name in names if name in exported]
        if hits:
            end = esm.text.char(stmt.end_byte)
            esm.edits.append(Edit(end, end, (f";__cmiU({','.join(json.dumps(n) for n in hits)})",)))


def _esm_wrapper(locals_: Sequence[str]) -> str:
    """The strict function an ESM module's source is evaluated in: its imports are locals
    the loader sets through ``__cmiCtx.set``; the hidden names the transform uses are too."""
    declare = f"let {', '.join(locals_)}; " if locals_ else ""
    cases = "".join(f"case {json.dumps(n)}: {n} = __cmiV; return; " for n in locals_)
    return wrapper_factory(
        "function (__cmiCtx) { 'use strict'; "
        + declare
        + "let __cmi_d = __cmiCtx.U; "
        + "const __cmiL = __cmiCtx.L, __cmiI = __cmiCtx.I, __cmiU = __cmiCtx.N, __cmiM = __cmiCtx.M; "
        + f"__cmiCtx.set = function (__cmiN, __cmiV) {{ switch (__cmiN) {{ {cases}}} }}; "
        + "return eval(__cmiCtx.src); }"
    )


def _tail(esm: _Esm, placed: bool) -> str:
    """After the last line: the registration call unless placed earlier, and ``__cmi_``.

    ``__cmi_()`` hands the loader a reader of the module's exported bindings (closures, so
    namespaces stay live and respect the temporal dead zone); ``__cmi_(specifier)`` is a
    dynamic import from inside the module.
    """
    locals_ = dict.fromkeys(local for _, local in esm.exports)
    cases = "".join(
        f"case {json.dumps(local)}:return {'__cmi_d' if local == DEFAULT_LOCAL else local};"
        for local in locals_
    )
    return (
        "\n;"
        + ("" if placed else PREFIX)
        + f"function {DYNAMIC_IMPORT}(__cmiS){{if(!arguments.length)return __cmiL("
        + f"function(__cmiN){{switch(__cmiN){{{cases}}}}});return __cmiI(__cmiS)}}"
    )
