"""What an MCP tool result becomes for the program: one envelope.

- ``isError``: the call rejects, with the result's text (the server's words for the model).
- structured content: the value, as the server sent it.
- otherwise the content blocks: one text block arrives as its string; several blocks as a
  list, text blocks as strings and the others (images, audio, resources) as their MCP
  objects (``{"type": "image", "mimeType": ..., "data": ...}``).
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent

from .._dispatch import tool_error, tool_result

__all__ = ["result_envelope", "result_text"]


def _block(block: Any) -> Any:
    if isinstance(block, TextContent):
        return block.text
    return block.model_dump(mode="json", by_alias=True, exclude_none=True)


def result_text(result: CallToolResult) -> str:
    """The result's text blocks, one after another (what an error result says)."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def result_envelope(provider: str, tool: str, result: CallToolResult) -> str:
    if result.is_error:
        text = result_text(result).strip()
        return tool_error(text or f"The tool {provider}.{tool} failed and gave no reason.")
    if result.structured_content is not None:
        return tool_result(result.structured_content)
    blocks = [_block(block) for block in result.content]
    if len(blocks) == 1:
        return tool_result(blocks[0])
    return tool_result(blocks if blocks else None)
