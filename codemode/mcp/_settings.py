"""The TOML file ``codemode mcp --config FILE`` reads: which upstream MCP servers and which
Python tool registries to serve, and how programs run.

::

    [run]
    timeout_ms = 10000          # each program's clock
    memory_mb = 256             # each isolate's memory bound (embedded pool only)
    max_workers = 2             # child processes of the embedded pool
    fleet = "redis://localhost:6379/0"   # run on a fleet instead (or --fleet)

    registries = ["myapp.tools:registry"]   # module:attribute, each a ToolRegistry

    [servers.github]            # the table's name is the program's global
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_PERSONAL_ACCESS_TOKEN = "..." }

    [servers.search]
    url = "https://search.example.com/mcp"
    headers = { Authorization = "Bearer ..." }
    call_timeout_s = 20

A mistake is a :class:`SettingsError` naming the file and the key, raised before anything
starts.
"""

from __future__ import annotations

import importlib
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tools import ToolRegistry
from ._config import HttpServer, ServerConfig, StdioServer

__all__ = ["RunSettings", "ServeSettings", "SettingsError", "load_settings"]

_STDIO_KEYS = frozenset({"command", "args", "env", "cwd", "call_timeout_s", "connect_timeout_s"})
_HTTP_KEYS = frozenset({"url", "headers", "call_timeout_s", "connect_timeout_s"})
_RUN_KEYS = frozenset({"timeout_ms", "memory_mb", "max_workers", "fleet"})
_TOP_KEYS = frozenset({"run", "servers", "registries"})


class SettingsError(ValueError):
    """The configuration file cannot be used; the text says where and what to change."""


@dataclass(frozen=True)
class RunSettings:
    timeout_ms: int | None = None
    memory_mb: int | None = None
    max_workers: int | None = None
    fleet: str | None = None


@dataclass(frozen=True)
class ServeSettings:
    servers: tuple[ServerConfig, ...]
    registries: tuple[ToolRegistry, ...]
    run: RunSettings


def _unknown(where: str, table: Mapping[str, Any], known: frozenset[str]) -> None:
    extra = sorted(set(table) - known)
    if extra:
        raise SettingsError(f"{where}: unknown key {extra[0]!r}; the keys are {', '.join(sorted(known))}.")


def _server(path: Path, name: str, table: object) -> ServerConfig:
    where = f"{path}: [servers.{name}]"
    if not isinstance(table, Mapping):
        raise SettingsError(f"{where} must be a table.")
    try:
        if "command" in table and "url" not in table:
            _unknown(where, table, _STDIO_KEYS)
            cwd = table.get("cwd")
            if isinstance(cwd, str):
                cwd = str(path.parent / cwd)
            return StdioServer(name, **{**table, "args": tuple(table.get("args", ())), "cwd": cwd})
        if "url" in table and "command" not in table:
            _unknown(where, table, _HTTP_KEYS)
            return HttpServer(name, **table)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{where}: {exc}") from None
    raise SettingsError(
        f"{where} needs either command (a server to start) or url (a server to reach), not both."
    )


def _registry(path: Path, spec: object) -> ToolRegistry:
    where = f"{path}: registries"
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise SettingsError(f"{where}: each entry is 'module:attribute', got {spec!r}.")
    module_name, attribute = spec.split(":")
    # The file's own folder comes first, so a registry module can sit beside it.
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"{where}: cannot import {module_name!r} ({exc}).") from None
    registry = getattr(module, attribute, None)
    if not isinstance(registry, ToolRegistry):
        raise SettingsError(
            f"{where}: {spec} is {type(registry).__name__}, not a codemode.tools.ToolRegistry."
        )
    return registry


def _run(path: Path, table: object) -> RunSettings:
    where = f"{path}: [run]"
    if not isinstance(table, Mapping):
        raise SettingsError(f"{where} must be a table.")
    _unknown(where, table, _RUN_KEYS)
    for key in ("timeout_ms", "memory_mb", "max_workers"):
        value = table.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise SettingsError(f"{where}: {key} must be a positive whole number, got {value!r}.")
    fleet = table.get("fleet")
    if fleet is not None and not isinstance(fleet, str):
        raise SettingsError(f"{where}: fleet must be a redis:// URL, got {fleet!r}.")
    return RunSettings(table.get("timeout_ms"), table.get("memory_mb"), table.get("max_workers"), fleet)


def load_settings(path: str | Path) -> ServeSettings:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path} is not valid TOML: {exc}") from None
    _unknown(str(path), data, _TOP_KEYS)
    servers_table = data.get("servers", {})
    if not isinstance(servers_table, Mapping):
        raise SettingsError(f"{path}: servers must be a table of [servers.NAME] tables.")
    registries = data.get("registries", [])
    if not isinstance(registries, list):
        raise SettingsError(f"{path}: registries must be a list of 'module:attribute' strings.")
    servers = tuple(_server(path, name, table) for name, table in servers_table.items())
    loaded = tuple(_registry(path, spec) for spec in registries)
    if not servers and not loaded:
        raise SettingsError(f"{path} names no tools: add a [servers.NAME] table or a registries list.")
    return ServeSettings(servers, loaded, _run(path, data.get("run", {})))
