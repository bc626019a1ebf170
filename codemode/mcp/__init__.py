"""MCP both ways: servers of the Model Context Protocol as codemode providers, and codemode
as an MCP server whose one tool runs programs over every configured tool.

Needs the ``mcp`` extra (``pip install 'codemode[mcp]'``), the official SDK.
"""

from __future__ import annotations

from ._config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_CONNECT_TIMEOUT_S, HttpServer, ServerConfig, StdioServer
from ._connection import McpTool
from ._toolset import McpTools, McpUnavailable

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "HttpServer",
    "McpTool",
    "McpTools",
    "McpUnavailable",
    "ServerConfig",
    "StdioServer",
]
