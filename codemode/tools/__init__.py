"""Tools for agent hosts: a registry that serves Python functions as tools, describes them
(JSON Schema, TypeScript declarations, a prompt block) and checks a call's arguments before
the function runs.

- ``_spec.py``: :class:`ToolSpec`, what a tool says about itself (JSON Schemas);
- ``_infer.py``: a spec's schemas from a Python function's type hints and docstring;
- ``_typescript.py``: TypeScript declarations from specs;
- ``_prompt.py``: the prompt block;
- ``_check.py``: a call's arguments against the declaration;
- ``_pydantic.py``: pydantic models as parameters and results, when the host uses pydantic;
- ``_approval.py``: approvals, a host's yes or no to each call of a tool that needs one;
- ``_registry.py``: :class:`ToolRegistry`, the dispatch that serves them.
"""

from __future__ import annotations

from ._approval import Approve, ToolCall
from ._prompt import prompt_block
from ._registry import ToolRegistry
from ._spec import ToolSpec
from ._typescript import typescript_declarations

__all__ = ["Approve", "ToolCall", "ToolRegistry", "ToolSpec", "prompt_block", "typescript_declarations"]
