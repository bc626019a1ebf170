"""codemode as an MCP server: ``codemode mcp --config FILE`` as a real process, over stdio
and streamable HTTP, talked to by the SDK's own client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent
from mcp_helpers import HERE, UPSTREAM, http_process, wait_dead

from codemode.fleet.testing import free_port
from codemode.mcp._settings import SettingsError, load_settings

PROGRAM = """async () => {
    console.log('forecast for', 'Oslo')
    return [await up.get_forecast({ city: 'Oslo' }), await local.double(21)]
}"""


def write_config(folder: Path) -> Path:
    path = folder / "codemode-mcp.toml"
    path.write_text(
        f"""
registries = ["registry_tools:registry"]

[run]
timeout_ms = 30000
max_workers = 1

[servers.up]
command = {json.dumps(sys.executable)}
args = [{json.dumps(UPSTREAM)}, "stdio"]
""",
        encoding="utf-8",
    )
    (folder / "registry_tools.py").write_text((HERE / "registry_tools.py").read_text(encoding="utf-8"))
    return path


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


async def exercise(client: Client) -> int:
    """Everything a client sees; returns the upstream server's pid (it must be gone after)."""
    listed = await client.list_tools()
    [execute] = listed.tools
    assert execute.name == "execute"
    assert execute.description is not None
    assert "declare const up: {" in execute.description
    assert "(The MCP tool 'get-forecast'.)" in execute.description
    assert "double(x: number): Promise<number>;" in execute.description

    result = await client.call_tool("execute", {"code": PROGRAM})
    assert not result.is_error, texts(result)
    assert texts(result) == ['["Oslo: sunny for 1 day(s)", 42]', "Logs:\n[log] forecast for Oslo"]
    assert result.structured_content == {
        "result": ["Oslo: sunny for 1 day(s)", 42],
        "error": None,
        "logs": [{"level": "log", "text": "forecast for Oslo"}],
    }

    failed = await client.call_tool("execute", {"code": "async () => { throw new Error('nope') }"})
    assert failed.is_error
    assert "nope" in texts(failed)[0]

    pid = await client.call_tool("execute", {"code": "async () => (await up.pid()).result"})
    assert isinstance(pid.structured_content, dict)
    return int(pid.structured_content["result"])


def test_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "codemode", "mcp", "--config", str(config)], cwd=str(tmp_path)
    )

    async def main() -> int:
        with anyio.fail_after(120):
            async with Client(params) as client:
                return await exercise(client)

    upstream = anyio.run(main)
    assert wait_dead(upstream), "the upstream server outlived codemode mcp"


def test_http(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    port = free_port()
    command = [sys.executable, "-m", "codemode", "mcp", "--config", str(config), "--http", str(port)]

    async def main() -> int:
        with anyio.fail_after(120):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return await exercise(client)

    with http_process(command, port):
        upstream = anyio.run(main)
    assert wait_dead(upstream), "the upstream server outlived codemode mcp"


def test_a_configuration_mistake_exits_2_with_a_sentence(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[servers.up]\ncommand = "x"\nurl = "http://x"\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "codemode", "mcp", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert (
        "[servers.up] needs either command (a server to start) or url (a server to reach), not both."
        in proc.stderr
    )
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[servers.up]\ncommand = 'x'\nport = 1\n", "[servers.up]: unknown key 'port'"),
        ("[servers.up]\nurl = 'ftp://x'\n", "url must be an http:// or https:// URL"),
        ("[servers.my-server]\ncommand = 'x'\n", "must be a JavaScript identifier"),
        ("registries = ['nowhere_at_all:registry']\n", "cannot import 'nowhere_at_all'"),
        ("registries = ['json:dumps']\n", "json:dumps is function, not a codemode.tools.ToolRegistry"),
        (
            "[run]\ntimeout_ms = -1\n[servers.up]\ncommand = 'x'\n",
            "timeout_ms must be a positive whole number",
        ),
        ("", "names no tools"),
        ("[servers\n", "is not valid TOML"),
    ],
)
def test_settings_mistakes(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    assert message in str(caught.value)
