"""The docker files name the same commands and settings the tests run with.

No Docker engine runs here, so this checks the text: the worker command is the one the
tests start (``python -m codemode worker``), the Redis flags are the tests' throwaway flags, every
``CODEMODE_*`` variable is one ``broker_config`` reads, and the example producer works
against a real fleet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import broker_config
from codemode.fleet.testing import REDIS_ARGS, WORKER_COMMAND, SharedFleet

pytestmark = pytest.mark.fleet

DOCKER = Path(__file__).resolve().parents[2] / "docker"
KNOWN_ENV = {value for name, value in vars(broker_config).items() if name.startswith("ENV_")}


def services() -> dict[str, dict[str, object]]:
    """The subset of YAML compose.yaml is written in: services, their keys, flow lists."""
    out: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    section: str | None = None
    for raw in (DOCKER / "compose.yaml").read_text().splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if indent == 2:
            current = out.setdefault(key, {})
        elif indent == 4 and current is not None:
            section = key
            if value.startswith("["):
                current[key] = json.loads(value)
            elif value:
                current[key] = value.strip('"')
            else:
                current[key] = {}
        elif indent == 6 and current is not None and section is not None:
            target = current[section]
            if isinstance(target, dict) and not line.strip().startswith("-"):
                target[key] = value.strip('"')
    return out


def test_worker_command_is_the_tested_command() -> None:
    compose = services()
    assert compose["worker"]["command"] == list(WORKER_COMMAND)
    cmd = re.search(r"^CMD (\[.*\])$", (DOCKER / "Dockerfile").read_text(), re.M)
    assert cmd is not None and json.loads(cmd.group(1)) == list(WORKER_COMMAND)


def test_redis_runs_like_the_tests_run_it() -> None:
    command = services()["redis"]["command"]
    assert isinstance(command, list) and command[0] == "redis-server"
    assert tuple(command[1:]) == REDIS_ARGS


def test_every_setting_is_one_broker_config_reads() -> None:
    compose = services()
    for name in ("worker", "producer"):
        env = compose[name]["environment"]
        assert isinstance(env, dict)
        assert env[broker_config.ENV_REDIS_URL] == "redis://redis:6379/0"
        unknown = set(env) - KNOWN_ENV
        assert not unknown, f"{name} sets variables broker_config does not read: {unknown}"
    dockerfile_env = set(re.findall(r"(CODEMODE_[A-Z_]+)=", (DOCKER / "Dockerfile").read_text()))
    assert dockerfile_env <= KNOWN_ENV
    worker_env = compose["worker"]["environment"]
    assert isinstance(worker_env, dict)
    # The pool the tests use, and one that never forks a process running isolates.
    assert worker_env[broker_config.ENV_WORKER_POOL] == broker_config.WorkerSettings().pool
    assert broker_config.WorkerSettings.from_env(worker_env).concurrency == 2


def test_workers_scale_with_compose_scale() -> None:
    worker = services()["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert "replicas: 2" in (DOCKER / "compose.yaml").read_text()


def test_example_producer_runs_against_a_fleet(fleet: SharedFleet) -> None:
    env = {**os.environ, **fleet.settings.env()}
    done = subprocess.run(
        [sys.executable, str(DOCKER / "producer.py")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "result: 42.5 error: None" in done.stdout


def test_worker_cli_returns_exit_codes_instead_of_raising(capsys: pytest.CaptureFixture[str]) -> None:
    from codemode.fleet.worker.cli import celery_argv, main

    assert main(["--help"]) == 0
    assert "codemode worker" in capsys.readouterr().out
    assert main(["--pool", "prefork"]) == 2
    assert main(["--concurrency", "0"]) == 2
    argv = celery_argv(broker_config.BrokerSettings(), broker_config.WorkerSettings())
    assert argv[:5] == ["worker", "--pool", "threads", "--concurrency", "2"]
    assert "--without-mingle" in argv and "--queues" in argv
