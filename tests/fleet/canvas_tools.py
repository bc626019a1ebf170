"""The tools the canvas tests' worker serves to ``codemode.run`` jobs
(``CODEMODE_WORKER_TOOLS=canvas_tools:registry``)."""

from __future__ import annotations

from codemode import ToolRegistry

registry = ToolRegistry()


@registry.tool("prices", "lookup")
def lookup(sku: str) -> int:
    """The price of ``sku`` in cents."""
    return {"apple": 120, "pear": 90}.get(sku, 0)


not_a_registry = "this names no ToolRegistry"
