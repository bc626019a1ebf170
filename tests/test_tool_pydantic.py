"""pydantic models as tool parameters and results: declared from ``model_json_schema()``,
checked and converted by the model before the tool runs, returned as JSON data."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from typing import Any, Literal

import pytest

from codemode import SyncIsolateExecutor, ToolRegistry

from .test_tool_declarations import typescript_problems

pydantic = pytest.importorskip("pydantic")


class Line(pydantic.BaseModel):  # type: ignore[misc,name-defined]
    """One line of a basket."""

    sku: str
    qty: int = pydantic.Field(default=1, ge=1, description="How many, at least one.")


class Basket(pydantic.BaseModel):  # type: ignore[misc,name-defined]
    """What a user is about to buy."""

    model_config = pydantic.ConfigDict(extra="forbid")

    user: str
    lines: list[Line]
    speed: Literal["normal", "express"] = "normal"


@dataclasses.dataclass
class Note:
    text: str


def basket_tools(calls: list[tuple[object, ...]]) -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool("shop", "price")
    def price(basket: Basket, notes: list[Note] | None = None) -> Basket:
        """The basket, priced.

        Args:
            basket: What to price.
        """
        calls.append((basket, notes))
        return basket

    return tools


def serve(tools: ToolRegistry, args: list[Any]) -> dict[str, Any]:
    reply = asyncio.run(tools.dispatch("shop", "price", json.dumps(args)))
    decoded: dict[str, Any] = json.loads(reply)
    return decoded


def test_a_model_is_declared_from_its_own_json_schema_as_valid_typescript() -> None:
    tools = basket_tools([])
    (spec,) = tools.specs()
    defs = spec.parameters["$defs"]
    assert spec.parameters["properties"]["basket"] == {
        "$ref": "#/$defs/Basket",
        "description": "What to price.",
    }
    assert defs["Basket"]["properties"]["lines"]["items"] == {"$ref": "#/$defs/Line"}
    assert defs["Line"]["properties"]["qty"]["minimum"] == 1
    assert "Note" in defs  # a dataclass beside the model, declared by msgspec
    assert spec.result is not None and spec.result["$ref"] == "#/$defs/Basket"
    text = tools.declarations()
    assert not typescript_problems(text), text
    assert "price(basket: Basket, notes?: Note[] | null): Promise<Basket>;" in text
    assert "type Basket = {" in text and "type Line = {" in text and text.count("type Line =") == 1
    assert 'speed?: "normal" | "express";' in text and "/** How many, at least one. */" in text


def test_a_bad_argument_is_refused_with_where_what_and_what_came_and_the_tool_not_called() -> None:
    calls: list[tuple[object, ...]] = []
    tools = basket_tools(calls)
    declared = "It is declared as price(basket: Basket, notes?: Note[] | null): Promise<Basket>."
    cases: dict[str, list[Any]] = {
        "at basket.lines[1].qty: expected a valid integer, got string": [
            {"user": "ada", "lines": [{"sku": "a"}, {"sku": "b", "qty": "many"}]}
        ],
        "at basket.lines[0].qty: expected greater than or equal to 1, got 0": [
            {"user": "ada", "lines": [{"sku": "a", "qty": 0}]}
        ],
        "at basket.lines[0]: object missing required field sku": [{"user": "ada", "lines": [{}]}],
        "at basket: object contains unknown field coupon": [{"user": "ada", "lines": [], "coupon": "x"}],
        "at basket.speed: expected 'normal' or 'express', got \"fast\"": [
            {"user": "ada", "lines": [], "speed": "fast"}
        ],
        "at basket: expected an object, got array": [[1]],
        "at notes[0]: object missing required field text": [{"user": "ada", "lines": []}, [{}]],
    }
    for detail, args in cases.items():
        error = serve(tools, args)["error"]
        assert error == f"shop.price was called with the wrong arguments: {detail}. {declared}", error
    assert calls == []


def test_a_good_argument_arrives_as_the_model_and_a_returned_model_as_json() -> None:
    calls: list[tuple[object, ...]] = []
    tools = basket_tools(calls)
    basket = {"user": "ada", "lines": [{"sku": "a", "qty": 2}, {"sku": "b"}]}
    assert serve(tools, [basket, [{"text": "gift"}]]) == {
        "result": {
            "user": "ada",
            "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}],
            "speed": "normal",
        }
    }
    assert calls == [(Basket(user="ada", lines=[Line(sku="a", qty=2), Line(sku="b")]), [Note("gift")])]


def test_models_through_a_run(executor: SyncIsolateExecutor) -> None:
    """The model's view: a refused call rejects with the sentence, a fixed one goes through."""
    tools = basket_tools([])
    outcome = executor.execute(
        """async () => {
            let first;
            try { await shop.price({ user: 'ada', lines: [{ sku: 'a', qty: 0 }] }) }
            catch (e) { first = e.message }
            const priced = await shop.price({ user: 'ada', lines: [{ sku: 'a' }] }, [{ text: 'x' }]);
            return { first, priced };
        }""",
        providers=tools.providers(),
        dispatch=tools.dispatch,
    )
    assert outcome.error is None, outcome.error
    assert outcome.result["first"].startswith(
        "shop.price was called with the wrong arguments: at basket.lines[0].qty: expected greater than"
    )
    assert outcome.result["priced"]["lines"] == [{"sku": "a", "qty": 1}]


def test_two_types_of_one_name_are_refused_at_registration() -> None:
    other_line = dataclasses.make_dataclass("Line", [("code", int)])  # the model Line differs

    def clash(basket: Basket, line: Any) -> None: ...

    clash.__annotations__ = {"basket": Basket, "line": other_line, "return": None}
    tools = ToolRegistry()
    with pytest.raises(
        ValueError, match=r"^The parameters of the tool shop\.clash name two different types Line: "
    ):
        tools.add("shop", "clash", clash)


def test_codemode_and_its_tools_do_not_import_pydantic() -> None:
    script = (
        "import sys\n"
        "from codemode import ToolRegistry\n"
        "tools = ToolRegistry()\n"
        "tools.add('a', 'f', lambda x: x)\n"
        "tools.declarations()\n"
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
