"""``codemode mcp``: serve the ``execute`` tool over stdio (the default: a desktop client
starts the command) or streamable HTTP (``--http PORT``, at ``/mcp``).

::

    codemode mcp --config tools.toml                       # stdio
    codemode mcp --config tools.toml --http 8765           # http://127.0.0.1:8765/mcp
    codemode mcp --config tools.toml --fleet redis://...   # programs run on a fleet

Exit status 2 for a configuration mistake or an upstream server that cannot be reached,
with the reason on stderr; stdout belongs to the protocol.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import anyio

from ._serve import build_server
from ._settings import ServeSettings, SettingsError, load_settings
from ._toolset import McpTools, McpUnavailable

__all__ = ["main"]

EXIT_FAULT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codemode mcp",
        description="Serve codemode as an MCP server: one execute tool over the configured tools.",
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="the TOML file naming the tools")
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (default: stdio)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address --http listens on (default 127.0.0.1)"
    )
    parser.add_argument("--fleet", metavar="REDIS_URL", help="run programs on the fleet at this Redis")
    return parser


def _executor(settings: ServeSettings, fleet: str | None) -> Any:
    run = settings.run
    timeout: dict[str, Any] = {} if run.timeout_ms is None else {"timeout": run.timeout_ms}
    redis_url = fleet or run.fleet
    if redis_url is not None:
        from ..fleet import FleetExecutor

        return FleetExecutor(redis_url, **timeout)
    from .._executor import IsolateExecutor

    options: dict[str, Any] = dict(timeout)
    if run.memory_mb is not None:
        options["memory_limit"] = run.memory_mb
    if run.max_workers is not None:
        options["pool"] = {"max_workers": run.max_workers}
    return IsolateExecutor(**options)


async def _serve(settings: ServeSettings, args: argparse.Namespace) -> None:
    async with (
        McpTools(settings.servers, registries=settings.registries) as tools,
        _executor(settings, args.fleet) as executor,
    ):
        server = build_server(tools, executor)
        if args.http is None:
            await server.run_stdio_async()
        else:
            await server.run_streamable_http_async(host=args.host, port=args.http)


def main(argv: Sequence[str], stderr: TextIO = sys.stderr) -> int:
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_FAULT
    try:
        settings = load_settings(args.config)
        anyio.run(_serve, settings, args)
    except (SettingsError, McpUnavailable) as exc:
        print(f"codemode mcp: {exc}", file=stderr)
        return EXIT_FAULT
    except KeyboardInterrupt:
        pass
    return 0
