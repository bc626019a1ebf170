"""The command line, run for real: ``python -m codemode ...`` in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from codemode import cli
from codemode.texts import NETWORK_DISABLED, memory_text, timeout_text

FENCE = "```"


def codemode(
    *args: str, stdin: bytes | str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "codemode", *args],
        input=data,
        capture_output=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def outcome_of(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {proc.stdout!r} (stderr {proc.stderr!r})"
    payload: dict[str, Any] = json.loads(lines[0])
    # error_detail only when the program threw (its name, position and stack).
    assert set(payload) - {"error_detail"} == {"result", "error", "logs"}
    assert ("error_detail" in payload) <= (payload["error"] is not None)
    return payload


# ---- the three ways in ------------------------------------------------------------------


def test_eval_success() -> None:
    proc = codemode("run", "-e", "async () => { console.log('working'); return 6 * 7 }")
    assert proc.returncode == 0, proc.stderr
    assert outcome_of(proc) == {
        "result": 42,
        "error": None,
        "logs": [{"level": "log", "text": "working"}],
    }


def test_file(tmp_path: Path) -> None:
    program = tmp_path / "program.js"
    program.write_text("async () => ({ sum: [1, 2, 3].reduce((a, b) => a + b, 0), s: 'é' })\n")
    proc = codemode("run", str(program))
    assert proc.returncode == 0, proc.stderr
    assert outcome_of(proc)["result"] == {"sum": 6, "s": "é"}


def test_stdin() -> None:
    proc = codemode("run", "-", stdin="async () => { console.warn('w'); return [1, null] }")
    assert proc.returncode == 0, proc.stderr
    assert outcome_of(proc) == {
        "result": [1, None],
        "error": None,
        "logs": [{"level": "warn", "text": "w"}],
    }


# ---- exit status 1: the program failed, the run was served ------------------------------


def test_program_error_exits_1() -> None:
    proc = codemode("run", "-e", "async () => { console.log('before'); throw new Error('nope') }")
    assert proc.returncode == 1
    assert outcome_of(proc) == {
        "result": None,
        "error": "nope",
        "logs": [{"level": "log", "text": "before"}],
        "error_detail": {
            "name": "Error",
            "message": "nope",
            "line": 1,
            "column": 44,
            "stack": ["at program:1:44"],
        },
    }
    assert proc.stderr == b""


def test_timeout_option() -> None:
    proc = codemode("run", "--timeout", "300", "-e", "async () => { while (true) {} }")
    assert proc.returncode == 1
    assert outcome_of(proc)["error"] == timeout_text(300)


def test_memory_option() -> None:
    code = "async () => { const a = []; while (true) a.push(new Array(1e5).fill(1)) }"
    proc = codemode("run", "--memory", "16", "--timeout", "20000", "-e", code)
    assert proc.returncode == 1
    assert outcome_of(proc)["error"] == memory_text(16)


def test_entry_form_is_not_guessed_without_normalize() -> None:
    proc = codemode("run", "-", stdin=f"{FENCE}js\nasync () => 6 * 7\n{FENCE}")
    assert proc.returncode == 1
    assert outcome_of(proc)["error"]


# ---- --normalize -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [f"Here:\n{FENCE}js\nasync () => 6 * 7\n{FENCE}\n", "6 * 7", "return 6 * 7", "const a = 6; a * 7"],
    ids=["fence", "expression", "return", "statements"],
)
def test_normalize(text: str) -> None:
    proc = codemode("run", "--normalize", "-", stdin=text)
    assert proc.returncode == 0, proc.stderr
    assert outcome_of(proc)["result"] == 42


def test_normalize_with_eval() -> None:
    proc = codemode("run", "--normalize", "-e", "await Promise.resolve(5)")
    assert proc.returncode == 0, proc.stderr
    assert outcome_of(proc)["result"] == 5


def test_normalize_empty_is_usage_error() -> None:
    proc = codemode("run", "--normalize", "-", stdin="   \n")
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert b"no program to run" in proc.stderr


# ---- --no-network ------------------------------------------------------------------------


def test_no_network() -> None:
    probe = codemode("run", "--no-network", "-e", "async () => typeof fetch")
    assert probe.returncode == 0, probe.stderr
    if outcome_of(probe)["result"] != "function":
        pytest.skip("the standard library's fetch is not installed in the isolate yet")
    code = "async () => { await fetch('https://example.com/'); return 'reached' }"
    proc = codemode("run", "--no-network", "-e", code)
    assert proc.returncode == 1
    assert outcome_of(proc)["error"] == NETWORK_DISABLED


# ---- exit status 2: executor faults and bad usage ----------------------------------------


def test_executor_fault_exits_2_naming_the_code() -> None:
    proc = codemode("run", "--timeout", "999999999", "-e", "async () => 1")
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert b"INVALID_REQUEST" in proc.stderr
    assert b"no program code ran" in proc.stderr


def test_empty_code_is_an_invalid_request() -> None:
    proc = codemode("run", "-e", "  ")
    assert proc.returncode == 2
    assert b"INVALID_REQUEST" in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["run"],
        ["run", "file.js", "-e", "async () => 1"],
        ["run", "--timeout", "0", "-e", "async () => 1"],
        ["run", "--memory", "lots", "-e", "async () => 1"],
        ["run", "does-not-exist.js"],
        ["frobnicate"],
        [],
    ],
    ids=["no-source", "two-sources", "zero-timeout", "bad-memory", "missing-file", "unknown", "none"],
)
def test_bad_usage_exits_2(args: list[str], tmp_path: Path) -> None:
    proc = codemode(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert proc.stderr.strip()


def test_non_utf8_program_is_usage_error(tmp_path: Path) -> None:
    program = tmp_path / "latin1.js"
    program.write_bytes(b"async () => '\xe9'")
    for proc in (codemode("run", str(program)), codemode("run", "-", stdin=b"async () => '\xe9'")):
        assert proc.returncode == 2
        assert b"UTF-8" in proc.stderr


def test_help_exits_0() -> None:
    proc = codemode("run", "--help")
    assert proc.returncode == 0
    assert b"--no-network" in proc.stdout


# ---- the worker slot ---------------------------------------------------------------------


def test_worker_without_fleet_says_so(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    def missing(name: str) -> Any:
        raise ModuleNotFoundError("No module named 'celery'", name="celery")

    monkeypatch.setattr("importlib.import_module", missing)
    assert cli.main(["worker", "--concurrency", "2"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'codemode[fleet]'" in err
    assert "celery" in err


def test_worker_passes_argv_through(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("codemode.fleet.worker.cli")

    def fleet_main(argv: list[str]) -> int:
        seen.append(argv)
        return 0

    fake.main = fleet_main  # type: ignore[attr-defined]  # a stand-in module, filled in here
    monkeypatch.setitem(sys.modules, "codemode.fleet.worker.cli", fake)
    monkeypatch.setattr("importlib.import_module", lambda name: sys.modules[name])
    assert cli.main(["worker", "--concurrency", "2", "-Q", "codemode"]) == 0
    assert seen == [["--concurrency", "2", "-Q", "codemode"]]


def test_worker_subprocess() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", "import codemode.fleet.worker.cli"], capture_output=True, timeout=60
    )
    proc = codemode("worker", "--help")
    if probe.returncode == 0:  # the fleet is installed: its own parser answers
        assert proc.returncode == 0, proc.stderr
        assert b"worker" in proc.stdout
    else:
        assert proc.returncode == 2
        assert b"fleet" in proc.stderr


def test_worker_exit_status_of_fleet_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(argv: list[str]) -> int:
        raise SystemExit(2)

    fake = types.ModuleType("codemode.fleet.worker.cli")
    fake.main = parse  # type: ignore[attr-defined]  # a stand-in module, filled in here
    monkeypatch.setitem(sys.modules, "codemode.fleet.worker.cli", fake)
    monkeypatch.setattr("importlib.import_module", lambda name: sys.modules[name])
    assert cli.main(["worker", "--bogus"]) == 2


# ---- the installed script ----------------------------------------------------------------


def test_console_script() -> None:
    script = shutil.which("codemode", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the codemode console script is not installed in this environment")
    proc = subprocess.run([script, "run", "-e", "async () => 'ok'"], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert outcome_of(proc)["result"] == "ok"


# ---- starting a worker: what goes wrong says so in one sentence ------------------------

NO_CELERY = '''
import sys


class _NoFleet:
    """Act as if the fleet extra were not installed: celery and kombu do not import."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("celery", "kombu"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoFleet())
'''


def worker_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "codemode", "worker", *args],
        capture_output=True,
        timeout=90,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})},
    )


def test_worker_without_the_fleet_extra_says_how_to_install_it(tmp_path: Path) -> None:
    """The real command, in a process where celery does not import (a sitecustomize on
    PYTHONPATH): the install sentence, exit 2, no traceback."""
    (tmp_path / "sitecustomize.py").write_text(NO_CELERY)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    proc = worker_command("--concurrency", "2", env={"PYTHONPATH": path})
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "pip install 'codemode[fleet]'" in err and "'celery'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--loglevel", "LOUD"], ["--loglevel", "LOUD", "DEBUG, INFO"]),
        (["--redis-url", "notaurl"], ["--redis-url", "notaurl", "redis://"]),
        (["--concurrency", "0"], ["--concurrency", "at least 1"]),
        (["--wait-for-redis", "soon"], ["--wait-for-redis", "soon"]),
    ],
)
def test_worker_bad_flag_names_the_flag(args: list[str], names: list[str]) -> None:
    proc = worker_command(*args)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    for name in names:
        assert name in err
    assert "CODEMODE_REDIS_URL" not in err
    assert "Traceback" not in err


def test_worker_bad_environment_names_the_variable() -> None:
    proc = worker_command(env={"CODEMODE_REDIS_URL": "notaurl"})
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "CODEMODE_REDIS_URL" in err and "notaurl" in err
    assert "Traceback" not in err


def test_worker_with_redis_down_says_so_first_and_gives_up_when_told() -> None:
    """Nothing listens on port 1: the first line says Redis is not answering, and
    ``--wait-for-redis 1`` ends the start with exit 1 instead of retrying forever."""
    proc = worker_command("--redis-url", "redis://127.0.0.1:1/0", "--wait-for-redis", "1")
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 1, lines
    assert "Redis at redis://127.0.0.1:1/0 is not answering" in lines[0]
    assert "did not start" in lines[-1]
    assert not any("Traceback" in line for line in lines)
