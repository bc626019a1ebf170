"""codemode as an MCP server: one ``execute`` tool that runs a program over every
configured tool, upstream MCP servers and Python registries alike.

The tool's description carries the TypeScript declarations of those tools, so a client
(a desktop assistant, an IDE) that lists its tools has everything its model needs to write
the program. A run's result, error and logs come back as MCP content: the result (JSON
text) or the error as the first text block, the logs as a second; ``structuredContent``
holds all three as data; a failed program is a result with ``isError``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ContentBlock, TextContent
from pydantic import Field

from .._faults import ExecutorError
from .._outcome import Outcome
from .._source.normalize import normalize_code
from ._toolset import McpTools

if TYPE_CHECKING:
    from .._executor import IsolateExecutor
    from ..fleet import FleetExecutor

__all__ = ["build_server", "execute_description", "outcome_result"]

_CODE_HELP = "The program: an async arrow function, `async () => { ... }`, whose return value is the result."


def execute_description(tools: McpTools) -> str:
    """What the ``execute`` tool tells a client's model: how to write the program, and the
    declarations of every tool it can call."""
    declarations = tools.declarations().rstrip("\n") or "// (no tools are configured)"
    return "\n".join(
        [
            "Run a JavaScript program in a fresh sandbox and get its result. Write one async "
            "arrow function, `async () => { ... }`; the JSON value it returns is the result. "
            "Do a whole task in one program: call the tools below, combine and filter their "
            "answers in code, and return only what is needed.",
            "",
            "The program can call these tools (every call returns a Promise; start independent "
            "calls together with Promise.all):",
            "",
            "```ts",
            declarations,
            "```",
            "",
            "A failed call rejects with an Error whose message says why. What the program writes "
            "with console.log comes back with the result. There is no file system, process or "
            "network besides these tools.",
        ]
    )


def outcome_result(outcome: Outcome) -> CallToolResult:
    """An outcome as MCP content (see the module's docstring)."""
    logs = [{"level": entry.level, "text": entry.text} for entry in outcome.logs]
    content: list[ContentBlock]
    if outcome.error is not None:
        content = [TextContent(type="text", text=outcome.error)]
    else:
        content = [TextContent(type="text", text=json.dumps(outcome.result, ensure_ascii=False))]
    if logs:
        lines = "\n".join(f"[{entry['level']}] {entry['text']}" for entry in logs)
        content.append(TextContent(type="text", text=f"Logs:\n{lines}"))
    structured: dict[str, Any] = {"result": outcome.result, "error": outcome.error, "logs": logs}
    return CallToolResult(content=content, structured_content=structured, is_error=outcome.error is not None)


def _failure(text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"result": None, "error": text, "logs": []},
        is_error=True,
    )


def build_server(
    tools: McpTools, executor: IsolateExecutor | FleetExecutor, *, name: str = "codemode"
) -> MCPServer:
    """An MCP server (not yet running) whose ``execute`` tool runs programs on ``executor``
    with ``tools``; both must stay open while it serves."""
    server: MCPServer = MCPServer(
        name,
        instructions="Use the execute tool to run a JavaScript program that calls the tools in its description.",
        log_level="WARNING",
    )

    async def execute(code: Annotated[str, Field(description=_CODE_HELP)]) -> CallToolResult:
        try:
            program = normalize_code(code)
        except ValueError as exc:
            return _failure(f"The program could not be read: {exc}")
        try:
            outcome = await executor.execute(program, providers=tools.providers(), dispatch=tools.dispatch)
        except ExecutorError as exc:
            ran = "the program had started" if exc.started else "no program code ran"
            again = "Run it again." if exc.retryable else "Running it again will not help."
            return _failure(f"The executor failed ({exc.code}; {ran}): {exc.message} {again}")
        return outcome_result(outcome)

    server.add_tool(execute, name="execute", description=execute_description(tools))
    return server
