"""Tools that describe themselves: schemas inferred from type hints and docstrings (or given
as JSON Schema), TypeScript declarations that parse as TypeScript, the prompt block, and
arguments checked before a tool runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Literal, TypedDict

import msgspec
import pytest
import tree_sitter_typescript as tsts
from tree_sitter import Language, Node, Parser

from codemode import SyncIsolateExecutor, ToolRegistry
from codemode.tools import ToolSpec, prompt_block, typescript_declarations

TYPESCRIPT = Parser(Language(tsts.language_typescript()))


def typescript_problems(source: str) -> list[str]:
    """ERROR and MISSING nodes of ``source`` parsed as TypeScript, as text."""
    found: list[str] = []

    def walk(node: Node) -> None:
        if node.type == "ERROR" or node.is_missing:
            found.append(
                f"{node.type} at {node.start_point}: {source[node.start_byte : node.end_byte + 20]!r}"
            )
        for child in node.children:
            walk(child)

    walk(TYPESCRIPT.parse(source.encode()).root_node)
    return found


def test_the_checker_itself_finds_broken_typescript() -> None:
    assert typescript_problems("declare const a: { f(x: ): Promise<; };")
    assert not typescript_problems("declare const a: { f(x?: number): Promise<string[]> };")


@dataclasses.dataclass
class Item:
    """One line of an order."""

    sku: str
    qty: int = 1


class Query(TypedDict, total=False):
    status: Literal["open", "shipped"]
    limit: int


class Order(msgspec.Struct):
    """An order as the store keeps it."""

    id: str
    items: list[Item]
    note: str | None = None


def store_tools() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool("store", "listOrders")
    def list_orders(user: str, query: Query | None = None) -> list[Order]:
        """A user's orders, newest first.

        Args:
            user: The user's id, e.g. "ada".
            query: Filters, all optional;
                leave it out for every order.
        """
        limit = (query or {}).get("limit", 10)
        return [Order(f"{user}-{i}", [Item("sku-1")]) for i in range(limit)]

    @tools.tool("store", "createOrder")
    async def create_order(user: str, items: list[Item], note: str | None = None) -> Order:
        """Create an order. (Text with */ cannot end the JSDoc early.)

        :param user: who orders
        :param items: at least one line
        """
        assert all(isinstance(item, Item) for item in items), "dataclasses arrive as dataclasses"
        return Order("o9", items, note)

    @tools.tool("store", "stats")
    def stats(days: int, fields: dict[str, object], pair: tuple[int, str], anything: Any = None) -> None:
        return None

    return tools


def test_python_tools_infer_descriptions_and_schemas() -> None:
    specs = {spec.name: spec for spec in store_tools().specs()}
    listing = specs["listOrders"]
    assert listing.description == "A user's orders, newest first."
    assert listing.positional
    params = listing.parameters
    assert list(params["properties"]) == ["user", "query"] and params["required"] == ["user"]
    assert params["properties"]["user"] == {"type": "string", "description": 'The user\'s id, e.g. "ada".'}
    assert (
        params["properties"]["query"]["description"] == "Filters, all optional; leave it out for every order."
    )
    assert params["$defs"]["Query"]["properties"]["status"] == {"enum": ["open", "shipped"]}
    assert listing.result is not None and listing.result["items"] == {"$ref": "#/$defs/Order"}
    create = specs["createOrder"]
    assert create.parameters["properties"]["user"]["description"] == "who orders"
    assert create.parameters["$defs"]["Item"]["description"] == "One line of an order."
    assert specs["stats"].result == {"type": "null"}


def test_declarations_are_valid_typescript_with_jsdoc() -> None:
    text = store_tools().declarations()
    assert not typescript_problems(text), text
    assert "declare const store: {" in text
    assert "listOrders(user: string, query?: Query | null): Promise<Order[]>;" in text
    assert "createOrder(user: string, items: Item[], note?: string | null): Promise<Order>;" in text
    assert (
        "stats(days: number, fields: Record<string, unknown>, pair: [number, string], anything?: unknown): Promise<null>;"
        in text
    )
    assert "@param user The user's id" in text and "* A user's orders, newest first." in text
    assert "*\\/" in text  # the */ of a description is escaped
    assert "type Order = {" in text and "type Item = {" in text and text.count("type Item =") == 1


MCP_LISTING = [
    {
        "name": "search_issues",
        "description": "Search a repository's issues.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": "Search words."},
                "per-page": {"type": "integer", "minimum": 1},
                "labels": {"type": "array", "items": {"type": "string"}},
                "sort": {"enum": ["created", "updated"]},
                "filter": {"$ref": "#/$defs/Filter"},
                "extra": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
                "either": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
            },
            "required": ["q"],
            "$defs": {"Filter": {"type": "object", "properties": {"state": {"type": ["string", "null"]}}}},
        },
        "outputSchema": {
            "type": "object",
            "properties": {"total": {"type": "integer"}},
            "required": ["total"],
        },
    },
    {"name": "ping", "inputSchema": {"type": "object"}},
]


def test_providers_declared_only_by_json_schema_read_the_same() -> None:
    specs = [ToolSpec.from_json("github", tool) for tool in MCP_LISTING]
    text = typescript_declarations(specs)
    assert not typescript_problems(text), text
    assert "declare const github: {" in text
    assert "search_issues(args: {" in text and '"per-page"?: number;' in text
    assert "either?: string | number[];" in text
    assert "extra?: Record<string, string | number>;" in text
    assert "}): Promise<{" in text and "total: number;" in text
    assert "ping(): Promise<unknown>;" in text
    both = typescript_declarations([*store_tools().specs(), *specs])
    assert not typescript_problems(both) and both.count("declare const") == 2


def test_names_that_collide_or_recurse_still_declare_valid_typescript() -> None:
    node = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
    }
    a = ToolSpec(
        "a",
        "tree",
        parameters={
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": node},
        },
    )
    other = {"type": "object", "properties": {"id": {"type": "string"}}}
    b = ToolSpec(
        "b",
        "get",
        parameters={
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": other},
        },
    )
    promise = ToolSpec(
        "c",
        "p",
        parameters={
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/Promise"}},
            "$defs": {"Promise": other},
        },
    )
    text = typescript_declarations([a, b, promise])
    assert not typescript_problems(text), text
    assert "type Node = {" in text and "type Node2 = {" in text and "type Promise2 = {" in text
    assert "children?: Node[];" in text


def test_the_prompt_block_holds_the_entry_form_the_declarations_and_the_rules() -> None:
    tools = store_tools()
    block = tools.prompt()
    assert "async () => { ... }" in block
    assert tools.declarations().strip() in block
    assert "rejects with an Error" in block and "console.log" in block
    assert "no network" in block and "no network" not in tools.prompt(network=True)
    assert "(no tools)" in prompt_block([])


@pytest.mark.parametrize(
    ("name", "schema"),
    [("1abc", {"type": "object"}), ("class", {"type": "object"}), ("ok", {"type": "array"})],
)
def test_a_spec_that_cannot_be_declared_is_refused_with_a_sentence(name: str, schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^The |must describe an object"):
        ToolSpec("store", name, parameters=schema)


class Opaque:
    pass


def test_a_function_that_cannot_be_described_is_refused_at_registration() -> None:
    tools = ToolRegistry()

    def takes_opaque(x: Opaque) -> None: ...
    def takes_rest(*values: int) -> None: ...
    def keyword_only(*, x: int) -> None: ...

    with pytest.raises(ValueError, match=r"parameter x of the tool store\.a is annotated with"):
        tools.add("store", "a", takes_opaque)
    with pytest.raises(ValueError, match=r"takes \*values"):
        tools.add("store", "b", takes_rest)
    with pytest.raises(ValueError, match="keyword-only parameter x"):
        tools.add("store", "c", keyword_only)
    with pytest.raises(ValueError, match="not a JavaScript identifier"):
        tools.add("my-store", "d", lambda: None)
    assert tools.specs() == []


# ---- arguments checked before a tool runs --------------------------------------------------


def serve(tools: ToolRegistry, provider: str, tool: str, args: list[Any]) -> dict[str, Any]:
    reply = asyncio.run(tools.dispatch(provider, tool, json.dumps(args)))
    decoded: dict[str, Any] = json.loads(reply)
    return decoded


def test_a_call_that_does_not_match_is_refused_and_the_tool_is_not_called() -> None:
    calls: list[tuple[object, ...]] = []
    tools = ToolRegistry()

    @tools.tool("store", "create")
    def create(user: str, items: list[Item], limit: int = 5) -> int:
        calls.append((user, items, limit))
        return len(items)

    cases: dict[str, list[Any]] = {
        "at user: expected string, got integer": [1, []],
        "at items[1]: object missing required field sku": ["ada", [{"sku": "a"}, {"qty": 2}]],
        "at items[0].qty: expected integer, got string": ["ada", [{"sku": "a", "qty": "2"}]],
        "at limit: expected integer, got null": ["ada", [], None],
        "expected at least 2 arguments (user, items), got 0": [],
        "expected at most 3 arguments (user, items, limit), got more": ["ada", [], 1, 2],
    }
    for detail, args in cases.items():
        error = serve(tools, "store", "create", args)["error"]
        assert error == (
            f"store.create was called with the wrong arguments: {detail}. It is declared as "
            "create(user: string, items: Item[], limit?: number): Promise<number>."
        ), error
    assert calls == []
    assert serve(tools, "store", "create", ["ada", [{"sku": "a"}]]) == {"result": 1}
    assert calls == [("ada", [Item("a", 1)], 5)]


def test_a_schema_declared_tool_gets_one_checked_object() -> None:
    seen: list[object] = []
    tools = ToolRegistry()
    schema = MCP_LISTING[0]["inputSchema"]

    @tools.tool("github", "search_issues", parameters=schema)  # type: ignore[arg-type]  # a JSON object
    async def search(args: dict[str, Any]) -> dict[str, int]:
        seen.append(args)
        return {"total": 3}

    assert serve(tools, "github", "search_issues", [{"q": "bug", "labels": ["x"]}]) == {
        "result": {"total": 3}
    }
    error = serve(tools, "github", "search_issues", [{"q": "bug", "per-page": 0}])["error"]
    assert error.startswith(
        "github.search_issues was called with the wrong arguments: at arguments.per-page: 0 is less than the minimum of 1."
    )
    assert "It is declared as search_issues(args: {" in error
    assert serve(tools, "github", "search_issues", [{}])["error"].startswith(
        "github.search_issues was called with the wrong arguments: at arguments: 'q' is a required property."
    )
    assert (
        "expected one object argument, got 2" in serve(tools, "github", "search_issues", ["a", "b"])["error"]
    )
    assert seen == [{"q": "bug", "labels": ["x"]}]


def test_checked_arguments_through_a_run(executor: SyncIsolateExecutor) -> None:
    """The model's view: a mismatched call rejects with a sentence it can act on, and a
    corrected call in the same run goes through."""
    tools = store_tools()
    outcome = executor.execute(
        """async () => {
            let first;
            try { await store.listOrders(42) } catch (e) { first = e.message }
            const orders = await store.listOrders('ada', { limit: 2 });
            const created = await store.createOrder('ada', [{ sku: 'x', qty: 3 }]);
            return { first, n: orders.length, created };
        }""",
        providers=tools.providers(),
        dispatch=tools.dispatch,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result["first"].startswith(
        "store.listOrders was called with the wrong arguments: at user: expected string, got integer."
    )
    assert outcome.result["n"] == 2
    assert outcome.result["created"] == {"id": "o9", "items": [{"sku": "x", "qty": 3}], "note": None}


def test_a_result_that_is_not_json_data_is_an_error_naming_the_tool() -> None:
    tools = ToolRegistry()

    @tools.tool("store", "weird")
    def weird() -> Any:
        return object()

    assert serve(tools, "store", "weird", [])["error"].startswith(
        "store.weird produced a value that is not JSON data"
    )


def test_an_object_with_an_async_call_is_served_as_an_async_tool() -> None:
    class Lookup:
        async def __call__(self, key: str) -> str:
            await asyncio.sleep(0)
            return key.upper()

    tools = ToolRegistry()
    tools.add("kv", "get", Lookup())
    assert serve(tools, "kv", "get", ["a"]) == {"result": "A"}
