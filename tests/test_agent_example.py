"""examples/agent.py runs: declarations in the prompt, TypeScript normalized, a mismatched
call and an unstrippable construct fed back to the stand-in model, then the answer."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


def test_the_agent_loop_feeds_errors_back_until_the_answer() -> None:
    example = load()
    model = example.ScriptedModel(example.REPLIES)
    answer = asyncio.run(example.agent(model, "How much do Ada's open orders come to?"))
    assert answer == "Result: 7\n[log] 1 of 2 orders are open"
    system = model.seen[0][0]["content"]
    assert "declare const store: {" in system and "listOrders(user: string" in system
    second, third = model.seen[1][-1]["content"], model.seen[2][-1]["content"]
    assert second.startswith(
        "Your program failed: store.listOrders was called with the wrong arguments: at user:"
    )
    assert third.startswith("Your program could not run: The program uses an enum on line 1")


def test_the_example_runs_as_a_script() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("Result: 7\n[log] 1 of 2 orders are open")
