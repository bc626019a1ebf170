"""A tool call that fails on a fleet job is placed at its call, as in process: the
rejection is made in the worker's isolate, the call's answer came from the host."""

from __future__ import annotations

import pytest

from codemode import ToolRegistry, normalize_code
from codemode.fleet import FleetExecutor

pytestmark = [pytest.mark.fleet, pytest.mark.anyio]

tools = ToolRegistry()


@tools.tool("store", "order")
def order(user: str, qty: int) -> int:
    """Order ``qty`` for ``user``."""
    return qty


async def test_a_rejected_call_is_placed_at_its_call_in_the_models_text(executor: FleetExecutor) -> None:
    answer = "Here:\n\n```js\nconst first = await store.order('ada', 1);\nreturn await store.order('ada', 'two');\n```"
    outcome = await executor.execute(
        normalize_code(answer), providers=tools.providers(), dispatch=tools.dispatch
    )
    assert outcome.error is not None and outcome.error.startswith(
        "store.order was called with the wrong arguments"
    )
    detail = outcome.error_detail
    assert detail is not None
    assert (detail.line, detail.column) == (5, 20)  # the second `order` of the answer
    assert detail.stack == ("at program:5:20",)
