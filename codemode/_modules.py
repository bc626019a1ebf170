"""Module loading for programs: the ``modules`` map, turned into one JavaScript bundle.

mini-racer's dynamic ``import()`` rejects with "Not supported", so loading is ours, in plain
JavaScript inside the run's isolate. Everything here is pure Python: the executor calls

* :func:`normalize_modules` to validate the request's ``modules`` field,
* :func:`rewrite_dynamic_imports` on the program, which turns each real ``import(`` call into
  ``__cmi_(`` (same width, so every line and column stays put), and
* :func:`build_module_bundle`, one function expression ``(host) => loader`` it evaluates in
  the isolate before the program runs; ``loader.import`` is what ``__cmi_`` must call.

How a module runs (the reasons are positions and speed):

* Each module's source is evaluated by a *direct* ``eval`` inside a small wrapper function
  generated for it. Direct eval numbers lines and columns from the module's own first
  character and honours ``//# sourceURL=codemode:module/<specifier>``, so stack traces point
  into the original source, and a strict wrapper keeps every lookup as fast as in a plain
  function (no ``with``, no sloppy ``var`` leaking into the wrapper).
* An ESM module's imports are ``let`` bindings of its wrapper. The loader writes them when
  the module starts, again once its dependencies have run, after each exported declaration
  of the exporting module runs, and when the exporting module finishes: a cycle sees a
  binding once it is initialised. Namespace objects read through getters, so they are live.
* Import and export statements are overwritten in place with spaces (line breaks kept), or
  with same-width code: ``export default <expr>`` becomes ``__cmi_d=<expr>``, an anonymous
  ``export default function`` becomes ``function __cmi_f``. A hoisted function ``__cmi_``
  appended after the last line hands the loader a reader of the module's exported bindings;
  a call ``__cmi_();`` placed in the blank left by the first import registers that reader and
  evaluates the dependencies before the body, which is what makes cycles behave as in JS.
  ``;__cmiU("x")`` after an exported declaration (on its last line, so at most the rest of
  that line moves) tells the loader the binding is initialised.
* A CJS module runs sloppy with ``this`` = ``module.exports`` in a wrapper whose parameters
  are ``module, exports, require`` and which declares the module's top-level ``var`` names (so
  sloppy eval adds nothing dynamic to it). One with a top-level ``return`` is compiled as that
  function instead (its first line's columns move by the header). A JSON module is
  ``JSON.parse``.
* tree-sitter finds what to rewrite. A problem it sees at the top level fails the module with
  its position; one inside a function is only a hint, since V8 decides what compiles.

Transforms are cached per process on (specifier, type, sha256(source)).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

import tree_sitter_javascript as tsjs
from tree_sitter import Language, Node, Parser, Query, QueryCursor

from ._faults import InvalidRequest

__all__ = [
    "DYNAMIC_IMPORT",
    "SOURCE_URL_PREFIX",
    "ModuleSpec",
    "ModuleType",
    "TransformedModule",
    "build_module_bundle",
    "normalize_module",
    "normalize_modules",
    "rewrite_dynamic_imports",
    "transform_module",
]

ModuleType = Literal["esm", "cjs", "json"]

DYNAMIC_IMPORT: Final = "__cmi_"
"""The global a rewritten program calls instead of ``import``: exactly as wide as ``import``."""

SOURCE_URL_PREFIX: Final = "codemode:module/"
"""Stack traces name a module's frames ``codemode:module/<specifier>:line:column``."""

_PREFIX: Final = "__cmi_();"  # registers the module's exports, then evaluates its dependencies
_DEFAULT_SLOT: Final = "__cmi_d="  # `export default <expr>` assigns the wrapper's `__cmi_d`
_ANON_DEFAULT: Final = "__cmi_f"  # the name given to `export default function () {}`
_DEFAULT_LOCAL: Final = "*default*"  # the loader's name for the value stored through __cmi_d
_META: Final = "__cmiM"  # `import.meta` (blank-padded to the same width)
_LOADER_URL: Final = "codemode:module-loader"  # the wrappers: compile errors are thrown there
_BUNDLE_URL: Final = "codemode:module-bundle"
_LINE_BREAKS: Final = "\n\r\u2028\u2029"
_MAX_LISTED: Final = 20

# ---------------------------------------------------------------------------------------------
# The `modules` field


@dataclass(frozen=True, slots=True)
class ModuleSpec:
    """One validated entry of ``modules``. For ``json`` the source is always JSON text."""

    specifier: str
    type: ModuleType
    source: str


_TYPES: Final = ("esm", "cjs", "json")
_EXPECTED: Final = (
    "a source string, {'type': 'esm' | 'cjs', 'source': str}, "
    "{'type': 'json', 'source': str} or {'type': 'json', 'value': <JSON data>}"
)


def _check_specifier(specifier: object) -> str:
    if not isinstance(specifier, str) or not specifier:
        raise InvalidRequest(f"modules: every specifier must be a non-empty string, not {specifier!r}.")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in specifier):
        # The specifier ends up in a `//# sourceURL=` comment: a line break would end it.
        raise InvalidRequest(
            f"modules: the specifier {specifier!r} must not contain whitespace or control characters."
        )
    return specifier


def normalize_module(specifier: object, module: object) -> ModuleSpec:
    """Validate one ``modules`` entry; raise :class:`InvalidRequest` naming it otherwise."""
    name = _check_specifier(specifier)
    where = f"modules[{name!r}]"
    if isinstance(module, ModuleSpec):
        if module.specifier != name:
            raise InvalidRequest(f"{where} is a ModuleSpec for {module.specifier!r}.")
        return module
    if isinstance(module, str):
        return ModuleSpec(name, "esm", module)
    if not isinstance(module, Mapping):
        raise InvalidRequest(f"{where} must be {_EXPECTED}; got {type(module).__name__}.")
    kind = module.get("type", "esm")
    if kind not in _TYPES:
        raise InvalidRequest(f"{where}['type'] must be 'esm', 'cjs' or 'json', not {kind!r}.")
    allowed = {"type", "source", "value"} if kind == "json" else {"type", "source"}
    unknown = sorted(str(key) for key in module if key not in allowed)
    if unknown:
        raise InvalidRequest(f"{where} has unknown keys {unknown}; expected {_EXPECTED}.")
    if kind == "json" and "value" in module:
        if "source" in module:
            raise InvalidRequest(f"{where} must give either 'source' (JSON text) or 'value', not both.")
        try:
            text = json.dumps(module["value"], ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"{where}['value'] must be JSON data: {exc}.") from None
        return ModuleSpec(name, "json", text)
    source = module.get("source")
    if not isinstance(source, str):
        what = "JSON text" if kind == "json" else "JavaScript source text"
        raise InvalidRequest(f"{where}['source'] must be a string of {what}; got {type(source).__name__}.")
    return ModuleSpec(name, cast(ModuleType, kind), source)


def normalize_modules(modules: Mapping[str, Any] | None) -> dict[str, ModuleSpec]:
    """Validate a whole ``modules`` map (``None`` means no modules), keeping its order."""
    if modules is None:
        return {}
    if not isinstance(modules, Mapping):
        raise InvalidRequest(
            f"modules must be a mapping of specifier -> module; got {type(modules).__name__}."
        )
    return {str(name): normalize_module(name, module) for name, module in modules.items()}


# ---------------------------------------------------------------------------------------------
# Parsing


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
_IMPORT_CALLS: Final = Query(_LANGUAGE, "(call_expression function: (import) @import)")
_local = threading.local()  # tree-sitter parsers are not shared between threads

_FUNCTION_BOUNDARIES: Final = frozenset(
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


def _parser() -> Parser:
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


class _Text:
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


class _ModuleSyntaxError(Exception):
    """A problem found at transform time: becomes the module's import-time SyntaxError."""


# ---------------------------------------------------------------------------------------------
# Edits that keep every line and column


@dataclass(frozen=True, slots=True)
class _Edit:
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


def _fill(span: str, tokens: Sequence[str]) -> tuple[str, bool]:
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


def _apply(source: str, edits: Iterable[_Edit]) -> str:
    out: list[str] = []
    at = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end)):
        out.append(source[at : edit.start])
        out.append(_fill(source[edit.start : edit.end], edit.tokens)[0])
        at = edit.end
    out.append(source[at:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# The program


def rewrite_dynamic_imports(code: str) -> str:
    """``code`` with every real ``import(`` call turned into ``__cmi_(``; nothing else changes.

    Found with tree-sitter, so ``import(`` inside strings, comments, template text and regex
    literals stays as written. The replacement is as wide as ``import``: lines and columns of
    everything in the program are unchanged.
    """
    if "import" not in code:
        return code
    data = bytearray(code.encode("utf-8", "surrogatepass"))
    tree = _parser().parse(bytes(data))
    found = QueryCursor(_IMPORT_CALLS).captures(tree.root_node).get("import", [])
    if not found:
        return code
    replacement = DYNAMIC_IMPORT.encode("ascii")
    for node in found:
        data[node.start_byte : node.end_byte] = replacement
    return data.decode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------------------------
# One module


@dataclass(frozen=True)
class TransformedModule:
    """What the loader needs of one module; ``error`` set means importing it throws that text.

    ``code`` is the JavaScript the loader evaluates (ESM and CJS: the rewritten source plus a
    tail after its last line; JSON: the JSON text); ``wrapper`` is the function it runs in
    (None: ``code`` is itself a function expression); ``hint`` is where tree-sitter saw a
    problem inside a function, for V8's error if the module does not compile.
    ``imports`` rows are ``(local, specifier, imported name or '*', position)``, ``exports``
    rows ``(exported name, local)``, ``indirect`` rows ``(exported name, specifier, imported
    name or '*', position)``.
    """

    specifier: str
    type: ModuleType
    code: str | None
    error: str | None = None
    wrapper: str | None = None
    hint: str | None = None
    deps: tuple[str, ...] = ()
    imports: tuple[tuple[str, str, str, str], ...] = ()
    exports: tuple[tuple[str, str], ...] = ()
    indirect: tuple[tuple[str, str, str, str], ...] = ()
    stars: tuple[str, ...] = ()
    anon_default: bool = False

    @functools.cached_property
    def record(self) -> str:
        """The module as a JavaScript array literal, the loader's input (computed once)."""
        return json.dumps(
            [
                self.specifier,
                self.type,
                {
                    "code": self.code,
                    "error": self.error,
                    "wrapper": self.wrapper,
                    "hint": self.hint,
                    "deps": self.deps,
                    "imports": self.imports,
                    "exports": self.exports,
                    "indirect": self.indirect,
                    "stars": self.stars,
                    "anon": self.anon_default,
                },
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )


class _SourceKey:
    """The cache key for a source: its sha256. Holds the text until the transform has run."""

    __slots__ = ("digest", "text")

    def __init__(self, text: str) -> None:
        self.text: str | None = text
        self.digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SourceKey) and other.digest == self.digest


def transform_module(spec: ModuleSpec) -> TransformedModule:
    """The loader's view of one module, cached on (specifier, type, sha256(source))."""
    return _transform_cached(spec.specifier, spec.type, _SourceKey(spec.source))


@functools.lru_cache(maxsize=4096)
def _transform_cached(specifier: str, kind: ModuleType, key: _SourceKey) -> TransformedModule:
    source = key.text
    assert source is not None
    key.text = None  # the cache keeps the digest, not a second copy of every source
    if kind == "json":
        module = _transform_json(specifier, source)
    else:
        try:
            module = (_transform_esm if kind == "esm" else _transform_cjs)(specifier, source)
        except _ModuleSyntaxError as exc:
            module = TransformedModule(specifier, kind, None, f"SyntaxError in module '{specifier}': {exc}")
    return module


def _transform_json(specifier: str, source: str) -> TransformedModule:
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    try:
        json.loads(source, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        error = f"SyntaxError in module '{specifier}': {exc.msg} at {exc.lineno}:{exc.colno}"
        return TransformedModule(specifier, "json", None, error)
    except ValueError as exc:
        return TransformedModule(specifier, "json", None, f"SyntaxError in module '{specifier}': {exc}")
    return TransformedModule(specifier, "json", source)


def _parse(text: _Text) -> tuple[Node, str | None]:
    """The tree, and where tree-sitter saw a problem only inside a function (or None).

    tree-sitter's JavaScript grammar is looser and stricter than V8's in places (it rejects
    `() => {}` followed by a line starting with `[`), so a problem inside a function body is
    only a hint: V8 judges when it compiles the module, and its error gets this position.
    A problem at the top level, where imports and exports live, stops the transform.
    """
    root = _parser().parse(text.data).root_node
    hint = None
    if root.has_error:
        for node, message in _errors(text, root):
            if _top_level(node):
                raise _ModuleSyntaxError(message)
            hint = hint or message.split(" at ", 1)[1].split(" ", 1)[0]
    return root, hint


_SKIP_BLANKS = re.compile(rb"(?:[ \t\f\v]|/\*(?:(?!\*/)[^\n\r])*\*/)*")


def _asi(text: _Text, node: Node) -> bool:
    """Whether a MISSING ';' is one JavaScript inserts itself: a line break, `}` or the end next.

    tree-sitter's scanner refuses automatic semicolons before a line that starts with `(`,
    `[` or a template (right for expressions), then recovers with MISSING ';' after
    statements such as `import x from 'y'` that JS ends there anyway.
    """
    data = text.data
    at = _SKIP_BLANKS.match(data, node.start_byte)
    rest = data[at.end() if at else node.start_byte :][:2]
    return rest[:1] in (b"", b"\n", b"\r", b"}") or rest == b"//" or rest[:2] == b"\xe2\x80"  # U+2028/9


def _errors(text: _Text, root: Node) -> Iterator[tuple[Node, str]]:
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


def _top_level(node: Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in _FUNCTION_BOUNDARIES:
            return False
        parent = parent.parent
    return True


def _scan(text: _Text, root: Node, *, esm: bool) -> tuple[list[_Edit], bool]:
    """Dynamic imports and import.meta rewritten; top-level await refused. The flag says
    whether there is a top-level `return` (illegal in ESM, allowed in CommonJS)."""
    found = QueryCursor(_QUERY).captures(root)
    returns = [node for node in found.get("return", []) if _top_level(node)]
    if returns and esm:
        raise _ModuleSyntaxError(f"Illegal return statement at {text.node_position(returns[0])}")
    if esm:
        for node in found.get("await", []):
            if _top_level(node):
                raise _ModuleSyntaxError(
                    f"Top-level await is not supported at {text.node_position(node)} "
                    "(export an async function instead)"
                )
    edits = [
        _Edit(text.char(n.start_byte), text.char(n.end_byte), (DYNAMIC_IMPORT,))
        for n in found.get("import", [])
    ]
    if esm:
        metas = found.get("meta", [])
        edits += [_Edit(text.char(n.start_byte), text.char(n.end_byte), (_META,)) for n in metas]
    return edits, bool(returns)


def _source_url(specifier: str) -> str:
    return f"\n//# sourceURL={SOURCE_URL_PREFIX}{specifier}"


def _transform_cjs(specifier: str, source: str) -> TransformedModule:
    text = _Text(source)
    root, hint = _parse(text)
    edits, returns = _scan(text, root, esm=False)
    if returns:
        # Only a function body may `return`: this module is compiled as one, which moves the
        # columns of its first line (and only those) by the width of the header.
        edits += [
            _Edit(text.char(n.start_byte), text.char(n.end_byte), ())
            for n in root.named_children
            if n.type == "hash_bang_line"
        ]
        head = f"(function (module, exports, require, {DYNAMIC_IMPORT}) {{"
        code = head + _apply(source, edits) + "\n})" + _source_url(specifier)
        return TransformedModule(specifier, "cjs", code, hint=hint)
    code = _apply(source, edits)
    names = [n for n in dict.fromkeys(_hoisted_vars(text, root)) if n not in ("eval", "arguments")]
    declare = f"var {', '.join(names)}; " if names else ""
    wrapper = _wrapper(
        f"function (module, exports, require, {DYNAMIC_IMPORT}, __cmiSrc) "
        f"{{ {declare}return eval(__cmiSrc); }}"
    )
    return TransformedModule(specifier, "cjs", code + _source_url(specifier), wrapper=wrapper, hint=hint)


def _wrapper(function: str) -> str:
    """A factory that binds the real ``eval`` (so calls stay direct) around ``function``."""
    return (
        f"(function (__cmiEval) {{ var eval = __cmiEval; return {function}; }})\n//# sourceURL={_LOADER_URL}"
    )


def _hoisted_vars(text: _Text, root: Node) -> list[str]:
    """Every name sloppy code hoists to its top level: `var`s and function declarations
    outside functions (Annex B hoists those in blocks too)."""
    names: list[str] = []
    stack = list(root.named_children)
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "variable_declaration":
            names += [text.text(n) for n in _declared_names(node)]
        elif kind == "for_in_statement" and any(c.type == "var" for c in node.children):
            names += [text.text(n) for n in _bound_names(node.child_by_field_name("left"))]
        elif kind in _HOISTED:
            names += [text.text(n) for n in _declared_names(node)]
            continue
        if kind not in _FUNCTION_BOUNDARIES and kind != "class_declaration" and kind != "class":
            stack.extend(node.named_children)
    return names


_UNESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|\r\n|[\s\S])")
_SIMPLE_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


def _string_value(text: _Text, node: Node) -> str:
    """The value of a JS string literal node (the escapes a specifier might use)."""

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        if body[0] in "ux" and len(body) > 1:
            return chr(int(body[1:].strip("{}"), 16))
        if body in ("\n", "\r", "\r\n", "\u2028", "\u2029"):
            return ""
        return _SIMPLE_ESCAPES.get(body, body)

    return _UNESCAPE.sub(one, text.text(node)[1:-1])


def _name(text: _Text, node: Node) -> str:
    """An import/export name: identifier, `default` or a string literal."""
    return _string_value(text, node) if node.type == "string" else text.text(node)


def _specifier_names(text: _Text, node: Node) -> tuple[Node, Node]:
    """(name, alias) nodes of an import/export specifier (alias is name when absent)."""
    names = [c for c in node.children if c.type in ("identifier", "string", "default", "property_identifier")]
    return names[0], names[-1]


def _bound_names(node: Node | None) -> list[Node]:
    """The identifiers a binding pattern declares."""
    if node is None:
        return []
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return [node]
    if node.type == "pair_pattern":
        return _bound_names(node.child_by_field_name("value"))
    if node.type in ("object_assignment_pattern", "assignment_pattern"):
        return _bound_names(node.child_by_field_name("left"))
    if node.type in ("object_pattern", "array_pattern", "rest_pattern"):
        return [n for child in node.named_children for n in _bound_names(child)]
    return []


def _declared_names(node: Node) -> list[Node]:
    if node.type in ("lexical_declaration", "variable_declaration"):
        return [
            n
            for d in node.named_children
            if d.type == "variable_declarator"
            for n in _bound_names(d.child_by_field_name("name"))
        ]
    name = node.child_by_field_name("name")
    return [name] if name is not None else []


_HOISTED: Final = frozenset({"function_declaration", "generator_function_declaration"})
_DECLARATIONS: Final = frozenset({"lexical_declaration", "variable_declaration", "class_declaration"})


@dataclass
class _Esm:
    """The tables one ESM transform collects."""

    text: _Text
    edits: list[_Edit] = field(default_factory=list)
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
        self.edits.append(_Edit(text.char(start.start_byte), text.char(end_byte), tokens))
        return len(self.edits) - 1

    def dep(self, node: Node) -> str:
        spec = _string_value(self.text, node)
        if spec not in self.deps:
            self.deps.append(spec)
        return spec

    def export_name(self, name: str, at: Node) -> None:
        if name in self.exported_at:
            raise _ModuleSyntaxError(f"Duplicate export of '{name}' at {self.text.node_position(at)}")
        self.exported_at[name] = at

    def declare(self, node: Node, kind: str = "declaration") -> None:
        """Record a top-level name; an import may share its name with nothing else."""
        name = self.text.text(node)
        if self.declared.get(name) == "import" or (kind == "import" and name in self.declared):
            raise _ModuleSyntaxError(
                f"Identifier '{name}' has already been declared at {self.text.node_position(node)}"
            )
        self.declared.setdefault(name, kind)


def _transform_esm(specifier: str, source: str) -> TransformedModule:
    text = _Text(source)
    root, hint = _parse(text)
    esm = _Esm(text)
    esm.edits.extend(_scan(text, root, esm=True)[0])
    import_locals: dict[str, tuple[str, str]] = {}
    for stmt in root.named_children:
        if stmt.type == "import_statement":
            _import_statement(esm, stmt, import_locals)
        elif stmt.type == "export_statement":
            _export_statement(esm, stmt)
        else:
            if stmt.type in _DECLARATIONS or stmt.type in _HOISTED:
                for name in _declared_names(stmt):
                    esm.declare(name)
            if stmt.type in _DECLARATIONS:
                esm.declarations.append((stmt, [text.text(n) for n in _declared_names(stmt)]))
            executable = not (
                stmt.type in _HOISTED
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
    code = _apply(source, esm.edits)
    locals_ = list(dict.fromkeys(local for local, *_ in esm.imports))
    return TransformedModule(
        specifier,
        "esm",
        code + _tail(esm, placed) + _source_url(specifier),
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
                    name, alias = _specifier_names(text, item)
                    bindings.append((alias, _name(text, name)))
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
            esm.export_name(_name(text, name_node), name_node)
            esm.indirect.append((_name(text, name_node), spec, "*", at))
        elif clause is not None:
            for item in clause.named_children:
                if item.type != "export_specifier":
                    continue
                name, alias = _specifier_names(text, item)
                esm.export_name(_name(text, alias), alias)
                esm.indirect.append((_name(text, alias), spec, _name(text, name), at))
        elif spec not in esm.stars:
            esm.stars.append(spec)
        esm.statements.append((esm.span(stmt, stmt.end_byte, (";",)), stmt, False))
    elif declaration is not None:
        names = _declared_names(declaration)
        for node in names:
            esm.declare(node)
            if not is_default:
                esm.export_name(text.text(node), node)
                esm.local_exports.append((text.text(node), node, node))
        if is_default:
            esm.export_name("default", stmt)
            esm.exports.append(("default", text.text(names[0])))
        if declaration.type in _DECLARATIONS:
            esm.declarations.append((stmt, [text.text(n) for n in names]))
        index = esm.span(stmt, declaration.start_byte, (";",))
        esm.statements.append((index, stmt, declaration.type not in _HOISTED))
    elif value is not None:
        esm.export_name("default", stmt)
        params = value.child_by_field_name("parameters")
        if value.type in ("function_expression", "generator_function") and params is not None:
            # An anonymous default function is a hoisted declaration in JS: give it a name.
            words = [text.text(c) for c in value.children if c.type in ("async", "function", "*")]
            head = " ".join(w for w in words if w != "*") + ("*" if "*" in words else "")
            esm.anon_default = True
            esm.exports.append(("default", _ANON_DEFAULT))
            index = esm.span(stmt, params.start_byte, (";", f"{head} {_ANON_DEFAULT}"))
            esm.statements.append((index, stmt, False))
        else:
            esm.exports.append(("default", _DEFAULT_LOCAL))
            esm.declarations.append((stmt, [_DEFAULT_LOCAL]))
            index = esm.span(stmt, value.start_byte, (";", _DEFAULT_SLOT))
            esm.statements.append((index, stmt, True))
    else:  # export { a as b }
        clause = next((c for c in stmt.named_children if c.type == "export_clause"), None)
        for item in clause.named_children if clause is not None else []:
            if item.type != "export_specifier":
                continue
            name, alias = _specifier_names(text, item)
            exported = _name(text, alias)
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
            tokens = (_PREFIX, *edit.tokens[1:])
            if _fill(source[edit.start : edit.end], tokens)[1] or executable:
                esm.edits[index] = _Edit(edit.start, edit.end, tokens)
                return True
        elif executable:
            start = esm.text.char(stmt.start_byte)
            esm.edits.append(_Edit(start, start, (_PREFIX,)))
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
            esm.edits.append(_Edit(end, end, (f";__cmiU({','.join(json.dumps(n) for n in hits)})",)))


def _esm_wrapper(locals_: Sequence[str]) -> str:
    """The strict function an ESM module's source is evaluated in: its imports are locals
    the loader sets through ``__cmiCtx.set``; the hidden names the transform uses are too."""
    declare = f"let {', '.join(locals_)}; " if locals_ else ""
    cases = "".join(f"case {json.dumps(n)}: {n} = __cmiV; return; " for n in locals_)
    return _wrapper(
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
        f"case {json.dumps(local)}:return {'__cmi_d' if local == _DEFAULT_LOCAL else local};"
        for local in locals_
    )
    return (
        "\n;"
        + ("" if placed else _PREFIX)
        + f"function {DYNAMIC_IMPORT}(__cmiS){{if(!arguments.length)return __cmiL("
        + f"function(__cmiN){{switch(__cmiN){{{cases}}}}});return __cmiI(__cmiS)}}"
    )


# ---------------------------------------------------------------------------------------------
# The bundle


def build_module_bundle(modules: Mapping[str, Any] | None) -> str:
    """One JavaScript function expression ``(host) => loader`` for the run's module map.

    In the isolate, before the program runs (while ``globalThis.eval`` is still the
    built-in)::

        const loader = (0, eval)(bundle)();          // indirect eval of the bundle alone
        Object.defineProperty(globalThis, '__cmi_', { value: loader.import });

    and run ``rewrite_dynamic_imports(code)`` instead of ``code``. ``loader.import(specifier)``
    returns a Promise of the module namespace; ``loader.specifiers`` lists the map. ``host``
    may be omitted; ``host.eval`` replaces the ``eval`` the loader would capture from the
    global (it must be the built-in ``eval`` itself, so module evaluation stays direct).
    The bundle ends in a ``//# sourceURL`` comment and a line break: evaluate it on its own.
    """
    specs = normalize_modules(modules)
    records = ",".join(transform_module(spec).record for spec in specs.values())
    return f"(host) => ({_LOADER})(host, {_CONFIG}, [{records}])\n//# sourceURL={_BUNDLE_URL}\n"


_CONFIG: Final = json.dumps(
    {
        "loaderUrl": _LOADER_URL,
        "sourceUrlPrefix": SOURCE_URL_PREFIX,
        "defaultSlot": _DEFAULT_SLOT[:-1],
        "defaultLocal": _DEFAULT_LOCAL,
        "anonDefault": _ANON_DEFAULT,
        "maxListed": _MAX_LISTED,
    }
)

# The loader. Everything it uses is captured when the bundle is called, before the program
# can touch a built-in; plain index loops (no iterators) and null-prototype descriptors keep
# a program that monkeypatches prototypes from reaching into it.
_LOADER: Final = """function (host, K, records) {
  'use strict';
  const G = globalThis;
  const ReflectApply = Reflect.apply;
  const ObjectCreate = Object.create;
  const define = Object.defineProperty;
  const freeze = Object.freeze;
  const ObjectKeys = Object.keys;
  const HasOwn = Object.prototype.hasOwnProperty;
  const ArrayPush = Array.prototype.push;
  const ArraySort = Array.prototype.sort;
  const StringIndexOf = String.prototype.indexOf;
  const StringSlice = String.prototype.slice;
  const JSONparse = JSON.parse;
  const PromiseCtor = Promise;
  const PromiseResolve = Promise.resolve;
  const PromiseReject = Promise.reject;
  const PromiseThen = Promise.prototype.then;
  const ErrorCtor = Error;
  const SyntaxErrorCtor = SyntaxError;
  const ReferenceErrorCtor = ReferenceError;
  const toStringTag = Symbol.toStringTag;
  const evaluator = host != null && host.eval != null ? host.eval : G.eval;
  const { loaderUrl: LOADER_URL, sourceUrlPrefix: SOURCE_URL_PREFIX, defaultSlot: DEFAULT_SLOT,
    defaultLocal: DEFAULT_LOCAL, anonDefault: ANON_DEFAULT, maxListed: MAX_LISTED } = K;
  const has = (o, k) => ReflectApply(HasOwn, o, [k]);
  const push = (a, v) => { ReflectApply(ArrayPush, a, [v]); };
  const AMBIGUOUS = freeze(ObjectCreate(null));
  const UNSET = freeze(ObjectCreate(null));  // `export default <expr>` not evaluated yet

  const registry = ObjectCreate(null);
  const specifiers = [];
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    registry[r[0]] = { __proto__: null, spec: r[0], kind: r[1], d: r[2], state: 0, link: 0,
      read: null, ns: null, ctx: null, module: null, value: undefined, error: undefined,
      parseError: null, imports: null, importers: [] };
    push(specifiers, r[0]);
  }
  freeze(specifiers);

  const quoted = (names) => {
    let out = '';
    const n = names.length < MAX_LISTED ? names.length : MAX_LISTED;
    for (let i = 0; i < n; i++) out += (i ? ', ' : '') + "'" + names[i] + "'";
    if (names.length > n) out += `, and ${names.length - n} more`;
    return out;
  };
  const unknown = (spec, importer) => {
    const from = importer ? ` from module '${importer.spec}'` : '';
    return new ErrorCtor(specifiers.length === 0
      ? `Cannot import '${spec}'${from}: no modules were declared for this run (declare it in modules).`
      : `Cannot import '${spec}'${from}: this run can import ${quoted(specifiers)} (declare it in modules).`);
  };
  const lookup = (spec, importer) => {
    if (!has(registry, spec)) throw unknown(spec, importer);
    return registry[spec];
  };
  const parseError = (rec) => {
    if (rec.parseError === null) rec.parseError = new SyntaxErrorCtor(rec.d.error);
    return rec.parseError;
  };
  const tdz = (name) => new ReferenceErrorCtor(`Cannot access '${name}' before initialization`);

  // ---- bindings: what an import or a namespace property reads -------------------------
  const same = (a, b) => a.k === b.k && a.rec === b.rec && a.name === b.name && a.key === b.key;
  const read = (b) => {
    const rec = b.rec;
    switch (b.k) {
      case 'local': {
        if (rec.read === null) throw tdz(b.name === DEFAULT_LOCAL ? 'default' : b.name);
        const v = rec.read(b.name);
        if (v === UNSET) throw tdz('default');
        return v;
      }
      case 'ns': return namespace(rec);
      case 'json': return rec.value;
      case 'cjs': {
        if (rec.module === null) return undefined;
        const e = rec.module.exports;
        return b.key === null ? e : (e == null ? undefined : e[b.key]);
      }
      default: {  // 'cjsstar': the first `export * from '<cjs>'` whose exports hold the key
        const recs = b.recs;
        for (let i = 0; i < recs.length; i++) {
          const m = recs[i].module;
          const e = m === null ? null : m.exports;
          if (e != null && (typeof e === 'object' || typeof e === 'function') && b.key in e) return e[b.key];
        }
        return undefined;
      }
    }
  };

  // ResolveExport of the spec, over the static tables; cjs exports are resolved when read.
  const resolveExport = (rec, name, seen) => {
    if (rec.kind === 'json') return name === 'default' ? { __proto__: null, k: 'json', rec } : null;
    if (rec.kind === 'cjs') return { __proto__: null, k: 'cjs', rec, key: name === 'default' ? null : name };
    for (let i = 0; i < seen.length; i += 2) if (seen[i] === rec && seen[i + 1] === name) return null;
    push(seen, rec); push(seen, name);
    const d = rec.d;
    for (let i = 0; i < d.exports.length; i++) {
      if (d.exports[i][0] === name) return { __proto__: null, k: 'local', rec, name: d.exports[i][1] };
    }
    for (let i = 0; i < d.indirect.length; i++) {
      const row = d.indirect[i];
      if (row[0] === name) {
        const dep = lookup(row[1], rec);
        return row[2] === '*' ? { __proto__: null, k: 'ns', rec: dep } : resolveExport(dep, row[2], seen);
      }
    }
    if (name === 'default') return null;
    let found = null;
    let weak = null;
    for (let i = 0; i < d.stars.length; i++) {
      const dep = lookup(d.stars[i], rec);
      const b = dep.kind === 'cjs'
        ? { __proto__: null, k: 'cjsstar', recs: [dep] } : resolveExport(dep, name, seen);
      if (b === AMBIGUOUS) return AMBIGUOUS;
      if (b === null) continue;
      if (b.k === 'cjsstar') {
        if (weak === null) weak = [];
        for (let j = 0; j < b.recs.length; j++) push(weak, b.recs[j]);
      } else if (found === null) {
        found = b;
      } else if (!same(found, b)) {
        return AMBIGUOUS;
      }
    }
    if (found !== null) return found;
    return weak === null ? null : { __proto__: null, k: 'cjsstar', recs: weak, key: name };
  };
  const exportedNames = (rec, visited, out, seen) => {
    if (rec.kind !== 'esm') return;
    for (let i = 0; i < visited.length; i++) if (visited[i] === rec) return;
    push(visited, rec);
    const d = rec.d;
    const star = visited.length > 1;
    const add = (name) => {
      if (!(star && name === 'default') && !seen[name]) { seen[name] = true; push(out, name); }
    };
    for (let i = 0; i < d.exports.length; i++) add(d.exports[i][0]);
    for (let i = 0; i < d.indirect.length; i++) add(d.indirect[i][0]);
    for (let i = 0; i < d.stars.length; i++) exportedNames(lookup(d.stars[i], rec), visited, out, seen);
  };
  const missing = (dep, name, importer, at, ambiguous) => new SyntaxErrorCtor(`The requested module '${
    dep.spec}' ${ambiguous ? 'contains conflicting star exports for name' : 'does not provide an export named'
    } '${name}' (module '${importer.spec}' at ${at})`);

  // ---- namespaces ------------------------------------------------------------------------
  // A namespace shows [name, binding] entries: the static ones, plus the names of cjs
  // exports once those modules have run. Built sorted; frozen once its module has evaluated.
  const staticEntries = (rec) => {
    const entries = [];
    if (rec.kind !== 'esm') {
      push(entries, ['default', rec.kind === 'json'
        ? { __proto__: null, k: 'json', rec } : { __proto__: null, k: 'cjs', rec, key: null }]);
      return entries;
    }
    const names = [];
    exportedNames(rec, [], names, ObjectCreate(null));
    for (let i = 0; i < names.length; i++) {
      const b = resolveExport(rec, names[i], []);
      if (b !== null && b !== AMBIGUOUS) push(entries, [names[i], b]);
    }
    return entries;
  };
  const cjsEntries = (dep, taken, entries, binding) => {
    const e = dep.module === null ? null : dep.module.exports;
    if (e == null || (typeof e !== 'object' && typeof e !== 'function')) return;
    const keys = ObjectKeys(e);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (key !== 'default' && !taken[key]) {
        taken[key] = true;
        push(entries, [key, binding(key)]);
      }
    }
  };
  const starCjs = (rec, visited, out) => {
    for (let i = 0; i < visited.length; i++) if (visited[i] === rec) return;
    push(visited, rec);
    for (let i = 0; i < rec.d.stars.length; i++) {
      const dep = lookup(rec.d.stars[i], rec);
      if (dep.kind === 'cjs') push(out, dep);
      else if (dep.kind === 'esm') starCjs(dep, visited, out);
    }
  };
  const dynamicEntries = (rec, taken, entries) => {
    if (rec.kind === 'cjs') {
      cjsEntries(rec, taken, entries, (key) => ({ __proto__: null, k: 'cjs', rec, key }));
    } else if (rec.kind === 'esm') {
      const deps = [];
      starCjs(rec, [], deps);
      for (let i = 0; i < deps.length; i++) {
        const dep = deps[i];
        cjsEntries(dep, taken, entries, (key) => ({ __proto__: null, k: 'cjsstar', recs: [dep], key }));
      }
    }
  };
  const byName = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  const show = (ns, entries) => {
    ReflectApply(ArraySort, entries, [byName]);
    for (let i = 0; i < entries.length; i++) {
      const b = entries[i][1];
      define(ns, entries[i][0], { __proto__: null, get: () => read(b), enumerable: true });
    }
  };
  const namespace = (rec) => {
    if (rec.ns !== null) return rec.ns;
    const ns = ObjectCreate(null);
    rec.ns = ns;
    define(ns, toStringTag, { __proto__: null, value: 'Module' });
    const entries = staticEntries(rec);
    if (rec.state === 2) {
      const taken = ObjectCreate(null);
      for (let i = 0; i < entries.length; i++) taken[entries[i][0]] = true;
      dynamicEntries(rec, taken, entries);
    }
    show(ns, entries);
    if (rec.state === 2) freeze(ns);
    return ns;
  };
  // A namespace handed out while its module ran (a cycle) learns its cjs names afterwards.
  const finishNamespace = (rec) => {
    const ns = rec.ns;
    const taken = ObjectCreate(null);
    const names = ObjectKeys(ns);
    for (let i = 0; i < names.length; i++) taken[names[i]] = true;
    const entries = [];
    dynamicEntries(rec, taken, entries);
    show(ns, entries);
    freeze(ns);
  };

  // ---- named imports: locals of the importer's wrapper, written when they can change -----
  // An entry is { rec: importer, local, b }; a binding still uninitialised is left as it is.
  const refresh = (entry) => {
    const ctx = entry.rec.ctx;
    if (ctx === null || typeof ctx.set !== 'function') return;
    let v;
    try { v = read(entry.b); } catch (e) { return; }
    ctx.set(entry.local, v);
  };
  const pull = (rec) => {
    for (let i = 0; i < rec.imports.length; i++) refresh(rec.imports[i]);
  };
  const pushAll = (rec) => {
    for (let i = 0; i < rec.importers.length; i++) refresh(rec.importers[i]);
  };
  // `export default function () {}` and `export default () => {}` are named 'default' in JS.
  const nameDefault = (rec) => {
    let v;
    try { v = rec.read(rec.d.anon ? ANON_DEFAULT : DEFAULT_LOCAL); } catch (e) { return; }
    if (typeof v === 'function' && (rec.d.anon || v.name === DEFAULT_SLOT)) {
      try { define(v, 'name', { __proto__: null, value: 'default' }); } catch (e) { /* keep its own */ }
    }
  };
  const notify = (rec, names) => {
    if (rec.read !== null) nameDefault(rec);
    const importers = rec.importers;
    for (let i = 0; i < importers.length; i++) {
      const b = importers[i].b;
      if (b.k !== 'local') continue;
      for (let j = 0; j < names.length; j++) {
        if (names[j] === b.name) { refresh(importers[i]); break; }
      }
    }
  };
  const register = (rec, reader) => {
    if (rec.read !== null) return;
    rec.read = reader;
    nameDefault(rec);
    pull(rec);  // what modules that ran earlier export, for a cycle that calls in early
    const deps = rec.d.deps;
    for (let i = 0; i < deps.length; i++) evaluate(lookup(deps[i], rec));
    pull(rec);
  };

  // ---- linking: every specifier and imported name checked before anything runs -----------
  let linking = [];
  const linkOne = (rec) => {
    if (rec.kind !== 'esm' || rec.link !== 0) return;
    if (rec.d.error !== null) throw parseError(rec);
    rec.link = 1;
    push(linking, rec);
    const d = rec.d;
    for (let i = 0; i < d.deps.length; i++) linkOne(lookup(d.deps[i], rec));
    const imports = [];
    for (let i = 0; i < d.imports.length; i++) {
      const row = d.imports[i];
      const dep = lookup(row[1], rec);
      let b;
      if (row[2] === '*') {
        b = { __proto__: null, k: 'ns', rec: dep };
      } else {
        b = resolveExport(dep, row[2], []);
        if (b === null || b === AMBIGUOUS) throw missing(dep, row[2], rec, row[3], b === AMBIGUOUS);
      }
      push(imports, { __proto__: null, rec, local: row[0], b });
    }
    for (let i = 0; i < d.indirect.length; i++) {
      const row = d.indirect[i];
      if (row[2] === '*') continue;
      const dep = lookup(row[1], rec);
      const b = resolveExport(dep, row[2], []);
      if (b === null || b === AMBIGUOUS) throw missing(dep, row[2], rec, row[3], b === AMBIGUOUS);
    }
    rec.imports = imports;
  };
  const link = (rec) => {
    linking = [];
    try {
      linkOne(rec);
    } catch (e) {
      for (let i = 0; i < linking.length; i++) { linking[i].link = 0; linking[i].imports = null; }
      linking = [];
      throw e;
    }
    for (let i = 0; i < linking.length; i++) {
      const r = linking[i];
      r.link = 2;
      for (let j = 0; j < r.imports.length; j++) {
        const entry = r.imports[j];
        const targets = entry.b.k === 'cjsstar' ? entry.b.recs : [entry.b.rec];
        for (let t = 0; t < targets.length; t++) push(targets[t].importers, entry);
      }
    }
    linking = [];
  };

  // ---- evaluation: once per run -----------------------------------------------------------
  // A SyntaxError whose first frame is a wrapper's own eval call came from compiling the
  // module (V8 gives no position for those); one thrown while the module ran is left alone.
  const compileError = (e, rec) => {
    if (!(e instanceof SyntaxErrorCtor) || rec.read !== null) return e;
    let stack;
    try { stack = e.stack; } catch (x) { return e; }
    if (typeof stack !== 'string') return e;
    const at = ReflectApply(StringIndexOf, stack, ['\\n    at ']);
    if (at < 0) return e;
    const end = ReflectApply(StringIndexOf, stack, ['\\n', at + 1]);
    const frame = ReflectApply(StringSlice, stack, [at, end < 0 ? stack.length : end]);
    if (ReflectApply(StringIndexOf, frame, [LOADER_URL]) < 0) return e;
    return compiled(rec, e);
  };
  const compiled = (rec, e) => new SyntaxErrorCtor(`SyntaxError in module '${rec.spec}': ${
    e && e.message}${rec.d.hint === null ? '' : ` near ${rec.d.hint}`}`);
  // The function a module runs in (or, for `wrapper: null`, the module compiled as one).
  const compile = (rec) => {
    try {
      return rec.d.wrapper === null ? evaluator(rec.d.code) : evaluator(rec.d.wrapper)(evaluator);
    } catch (e) {
      throw compiled(rec, e);
    }
  };
  const requireModule = (id) => {
    const spec = `${id}`;
    if (!has(registry, spec)) {
      const e = new ErrorCtor(`Cannot find module '${spec}'`);
      e.code = 'MODULE_NOT_FOUND';
      throw e;
    }
    const dep = registry[spec];
    if (dep.kind === 'esm') link(dep);
    evaluate(dep);
    if (dep.kind === 'esm') return namespace(dep);
    return dep.kind === 'cjs' ? dep.module.exports : dep.value;
  };
  const run = (rec) => {
    if (rec.d.error !== null) throw parseError(rec);
    if (rec.kind === 'json') {
      rec.value = JSONparse(rec.d.code);
      return;
    }
    const fn = compile(rec);
    try {
      if (rec.kind === 'esm') {
        rec.ctx = { __proto__: null, src: rec.d.code, U: UNSET, set: null, I: importModule,
          L: (reader) => register(rec, reader), N: (...names) => notify(rec, names),
          M: { __proto__: null, url: SOURCE_URL_PREFIX + rec.spec } };
        fn(rec.ctx);
      } else {
        const module = { exports: {}, id: rec.spec, loaded: false };
        rec.module = module;
        ReflectApply(fn, module.exports, [module, module.exports, requireModule, importModule, rec.d.code]);
        module.loaded = true;
      }
    } catch (e) {
      throw compileError(e, rec);
    }
    if (rec.kind === 'esm' && rec.read === null) rec.read = () => undefined;
  };
  const evaluate = (rec) => {
    if (rec.state === 1 || rec.state === 2) return;
    if (rec.state === 3) throw rec.error;
    rec.state = 1;
    try {
      run(rec);
    } catch (e) {
      rec.state = 3;
      rec.error = e;
      throw e;
    }
    rec.state = 2;
    if (rec.ns !== null) finishNamespace(rec);
    pushAll(rec);
  };
  const load = (spec) => {
    const rec = lookup(spec, null);
    if (rec.kind === 'esm') link(rec);
    evaluate(rec);
    return namespace(rec);
  };
  function importModule(specifier) {
    let spec;
    try { spec = `${specifier}`; } catch (e) { return ReflectApply(PromiseReject, PromiseCtor, [e]); }
    const ready = ReflectApply(PromiseResolve, PromiseCtor, [undefined]);
    return ReflectApply(PromiseThen, ready, [() => load(spec)]);
  }
  return freeze({ __proto__: null, import: importModule, specifiers });
}"""
