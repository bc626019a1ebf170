"""TypeScript declarations for the prompt, written from tools' JSON Schemas.

One ``declare const <provider>: {...}`` per provider, a method per tool with JSDoc from the
descriptions, and a ``type`` alias per named schema (``$defs``) the tools share. Every tool
goes through JSON Schema first, so a Python function and an MCP server's tool read alike.
The subset of JSON Schema that has a TypeScript form is translated (types, ``enum``,
``const``, ``anyOf``/``oneOf``/``allOf``, ``properties``, ``additionalProperties``,
``items``/``prefixItems``, local ``$ref``); anything else reads ``unknown``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ._spec import ToolSpec

__all__ = ["method_signature", "typescript_declarations"]

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_REF = re.compile(r"^#/(?:\$defs|definitions)/(?P<name>.+)$")
_TAKEN = frozenset(
    "Array Boolean Date Error JSON Map Math Number Object Promise Record Set String Symbol "
    "URL any boolean never null number object string symbol undefined unknown void".split()
)
_PRIMITIVES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}


def _comment(text: str, indent: str) -> list[str]:
    """A JSDoc block for ``text`` (``*/`` inside it cannot end the comment early)."""
    lines = text.replace("*/", "*\\/").splitlines() or [""]
    if len(lines) == 1 and len(lines[0]) < 90:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) else json.dumps(name)


def _literal(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return json.dumps(value)
    return "unknown"


def _union(members: Iterable[str]) -> str:
    unique = list(dict.fromkeys(members))
    if "unknown" in unique:
        return "unknown"
    return " | ".join(unique) if unique else "never"


class _Writer:
    """Turns schemas into TypeScript types, naming each shared ``$defs`` schema once."""

    def __init__(self) -> None:
        self.aliases: dict[str, list[str]] = {}
        self._named: dict[tuple[str, str], str] = {}

    def alias(self, name: str, defs: Mapping[str, Any]) -> str:
        schema = defs.get(name)
        if not isinstance(schema, Mapping | bool):
            return "unknown"
        key = (name, json.dumps(schema, sort_keys=True, default=str))
        found = self._named.get(key)
        if found is not None:
            return found
        base = re.sub(r"[^A-Za-z0-9_$]", "_", name) or "Type"
        if base[0].isdigit():
            base = "_" + base
        alias, n = base, 1
        while alias in self.aliases or alias in _TAKEN:
            n += 1
            alias = f"{base}{n}"
        self._named[key] = alias
        self.aliases[alias] = []  # taken before its body is written: a schema may refer to itself
        lines = []
        description = schema.get("description") if isinstance(schema, Mapping) else None
        if description:
            lines += _comment(str(description), "")
        lines.append(f"type {alias} = {self.type(schema, defs, '')};")
        self.aliases[alias] = lines
        return alias

    def type(self, schema: Any, defs: Mapping[str, Any], indent: str) -> str:
        if schema is True or schema is None:
            return "unknown"
        if schema is False:
            return "never"
        if not isinstance(schema, Mapping):
            return "unknown"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            match = _REF.match(ref)
            return self.alias(match["name"], defs) if match else "unknown"
        if "const" in schema:
            return _literal(schema["const"])
        if isinstance(schema.get("enum"), list):
            return _union(_literal(v) for v in schema["enum"])
        for combinator in ("anyOf", "oneOf"):
            if isinstance(schema.get(combinator), list):
                return _union(self.type(s, defs, indent) for s in schema[combinator])
        if isinstance(schema.get("allOf"), list) and schema["allOf"]:
            return " & ".join(self._wrapped(s, defs, indent) for s in schema["allOf"])
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union(self.type({**schema, "type": k}, defs, indent) for k in kind)
        if kind is None:
            if "properties" in schema or "additionalProperties" in schema:
                kind = "object"
            elif "items" in schema or "prefixItems" in schema:
                kind = "array"
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        if kind == "array":
            return self._array(schema, defs, indent)
        if kind == "object":
            return self._object(schema, defs, indent)
        return "unknown"

    def _wrapped(self, schema: Any, defs: Mapping[str, Any], indent: str) -> str:
        text = self.type(schema, defs, indent)
        return f"({text})" if " | " in text or " & " in text else text

    def _array(self, schema: Mapping[str, Any], defs: Mapping[str, Any], indent: str) -> str:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(prefix, list):
            members = [self.type(s, defs, indent) for s in prefix]
            if items is not False:
                members.append(f"...Array<{self.type(items, defs, indent)}>")
            return f"[{', '.join(members)}]"
        element = self.type(items, defs, indent)
        if _IDENTIFIER.match(element) or element.endswith("[]"):
            return f"{element}[]"
        return f"Array<{element}>"

    def _object(self, schema: Mapping[str, Any], defs: Mapping[str, Any], indent: str) -> str:
        properties = schema.get("properties")
        extra = schema.get("additionalProperties", True)
        if not isinstance(properties, Mapping) or not properties:
            if extra is False:
                return "Record<string, never>"
            return f"Record<string, {self.type(extra, defs, indent)}>"
        required = set(schema.get("required") or ())
        inner = indent + "  "
        lines = ["{"]
        for name, prop in properties.items():
            description = prop.get("description") if isinstance(prop, Mapping) else None
            if description:
                lines += _comment(str(description), inner)
            optional = "" if name in required else "?"
            lines.append(f"{inner}{_key(name)}{optional}: {self.type(prop, defs, inner)};")
        if extra is not False and extra is not True and extra:
            lines.append(f"{inner}[key: string]: unknown;")
        lines.append(f"{indent}}}")
        return "\n".join(lines)

    def method(self, spec: ToolSpec, indent: str) -> list[str]:
        """The tool's JSDoc and method signature, as lines at ``indent``."""
        params = spec.parameters
        defs = {**(params.get("definitions") or {}), **(params.get("$defs") or {})}
        properties = params.get("properties") or {}
        required = set(params.get("required") or ())
        doc = [spec.description] if spec.description else []
        if spec.positional:
            arguments: list[str] = []
            rest_required = False
            for name in reversed(list(properties)):
                prop = properties[name]
                rest_required = rest_required or name in required
                optional = "" if rest_required else "?"
                text = self.type(prop, defs, indent)
                if name not in required and rest_required:
                    text = f"{text} | undefined"
                arguments.insert(0, f"{_key(name)}{optional}: {text}")
            for name, prop in properties.items():
                if isinstance(prop, Mapping) and prop.get("description"):
                    doc.append(f"@param {name} {prop['description']}")
            signature = ", ".join(arguments)
        else:
            optional = "" if required else "?"
            signature = f"args{optional}: {self.type(params, defs, indent)}" if properties else ""
        result = spec.result
        if result is not None:
            result_defs = {**(result.get("definitions") or {}), **(result.get("$defs") or {})}
            answer = self.type(result, result_defs, indent)
            if isinstance(result, Mapping) and result.get("description"):
                doc.append(f"@returns {result['description']}")
        else:
            answer = "unknown"
        lines = _comment("\n".join(doc), indent) if doc else []
        lines.append(f"{indent}{_key(spec.name)}({signature}): Promise<{answer}>;")
        return lines


def typescript_declarations(specs: Iterable[ToolSpec]) -> str:
    """TypeScript for the prompt: the shared types, then one ``declare const`` per
    provider with a method per tool, in the order the tools were given."""
    writer = _Writer()
    providers: dict[str, list[str]] = {}
    for spec in specs:
        providers.setdefault(spec.provider, []).extend(writer.method(spec, "  "))
    blocks = ["\n".join(lines) for lines in writer.aliases.values()]
    for provider, members in providers.items():
        blocks.append("\n".join([f"declare const {provider}: {{", *members, "};"]))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def method_signature(spec: ToolSpec) -> str:
    """The tool's signature on one line, for an error text: ``listOrders(user: string): ...``."""
    line = _Writer().method(spec, "")[-1]
    return " ".join(line.split()).removesuffix(";")
