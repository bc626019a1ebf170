"""A ToolRegistry that the tests' TOML configuration names (``registry_tools:registry``)."""

from __future__ import annotations

from codemode import ToolRegistry

registry = ToolRegistry()


@registry.tool("local")
def double(x: int) -> int:
    """Twice x."""
    return 2 * x
