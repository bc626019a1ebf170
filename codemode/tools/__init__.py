"""Tools for agent hosts: a registry that serves Python functions as tools, describes them
(JSON Schema, TypeScript declarations, a prompt block) and checks a call's arguments before
the function runs."""

from __future__ import annotations

from ._registry import ToolRegistry

__all__ = ["ToolRegistry"]
