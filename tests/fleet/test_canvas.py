"""``codemode.run`` in Celery canvas, against a real worker process and a real Redis result
backend: chains pass results on, groups and chords collect them, faults arrive as data
(raised as ``CanvasFault`` or returned), Celery retries what RetryPolicy would, a
redelivered started try never runs its program twice, and the worker's tools come from
``CODEMODE_WORKER_TOOLS`` (a bad path stops the start with a sentence).

Faults inside the isolate children are injected by ``canvas_faults/sitecustomize.py``,
once per token file, so that a retry can succeed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import chain, chord, group

from codemode import InvalidRequest, WorkerCrashed
from codemode._retry import note_attempts
from codemode.fleet.canvas import CanvasFault, canvas_app, fault_of, fault_result, run_signature
from codemode.fleet.settings import ENV_WORKER_TOOLS, BrokerSettings, SettingsError, WorkerSettings
from codemode.fleet.testing import SharedFleet, WorkerProcess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
JOB_KEY = "canvas-" + "k" * 40
"""The canvas worker runs signed jobs only: every test below also proves that what it runs
(a chain's next step, a chord's callback, an errback, Celery's retry) was signed."""
RESULT_TIMEOUT_S = 120.0
"""Generous: the machine is shared, and a retry waits up to a few seconds of back-off."""


@dataclass
class CanvasFleet:
    settings: BrokerSettings
    app: Any
    worker: WorkerProcess
    tokens: Path

    def token(self) -> str:
        """A one-shot fault token: the first child that sees it injects the fault."""
        name = uuid.uuid4().hex
        (self.tokens / name).touch()
        return name


def worker_env(tokens: Path) -> dict[str, str]:
    path = os.pathsep.join(
        p for p in (str(HERE / "canvas_faults"), str(HERE), os.environ.get("PYTHONPATH")) if p
    )
    return {"PYTHONPATH": path, "CODEMODE_TEST_CANVAS_FAULTS": str(tokens)}


@pytest.fixture(scope="module")
def canvas(fleet: SharedFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CanvasFleet]:
    tag = uuid.uuid4().hex[:8]
    settings = replace(
        fleet.settings,
        queue=f"canvas-{tag}",
        key_prefix=f"canvas-{tag}",
        result_backend=fleet.settings.redis_url,
        job_key=JOB_KEY,
    )
    tokens = tmp_path_factory.mktemp("canvas-tokens")
    worker = WorkerProcess(
        settings,
        WorkerSettings(concurrency=2, tools="canvas_tools:registry"),
        env=worker_env(tokens),
        log_dir=tmp_path_factory.mktemp("canvas-logs"),
        name="canvas",
    ).start()
    app = canvas_app(settings)
    try:
        yield CanvasFleet(settings, app, worker, tokens)
    finally:
        app.close()
        worker.stop()
        assert not worker.alive(), "the canvas worker left processes behind"


def test_a_job_returns_its_outcome_as_a_plain_dict_and_calls_the_workers_tools(canvas: CanvasFleet) -> None:
    code = "async () => { console.log('pricing'); return await prices.lookup('apple') * 2 }"
    result = run_signature(code, app=canvas.app).apply_async().get(timeout=RESULT_TIMEOUT_S)
    metadata = {key: result.pop(key) for key in ("tool_calls", "duration_ms", "ran_on")}
    assert result == {"result": 240, "error": None, "logs": [{"level": "log", "text": "pricing"}]}
    assert metadata["tool_calls"] == 1 and metadata["duration_ms"] > 0 and "/child " in metadata["ran_on"]


def test_a_program_error_is_a_served_result_not_a_fault(canvas: CanvasFleet) -> None:
    sig = run_signature("async () => { throw new Error('order 7 not found') }", app=canvas.app)
    result = sig.apply_async().get(timeout=RESULT_TIMEOUT_S)
    assert "order 7 not found" in result["error"] and fault_of(result) is None


def test_a_chain_passes_each_result_on_as_the_next_programs_inputs(canvas: CanvasFleet) -> None:
    flow = chain(
        run_signature("(n) => n + 1", inputs=1, app=canvas.app),
        run_signature("(previous) => previous.result * 10", app=canvas.app),
        run_signature("() => 'ignores what came before'", immutable=True, app=canvas.app),
    )
    assert flow.apply_async().get(timeout=RESULT_TIMEOUT_S)["result"] == "ignores what came before"
    two = chain(
        run_signature("(n) => n + 1", inputs=1, app=canvas.app),
        run_signature("(previous) => previous.result * 10", app=canvas.app),
    )
    assert two.apply_async().get(timeout=RESULT_TIMEOUT_S)["result"] == 20


def test_a_chord_callback_gets_every_result_and_branches_on_returned_faults(canvas: CanvasFleet) -> None:
    header = [run_signature("(n) => n * n", inputs=n, on_fault="return", app=canvas.app) for n in range(6)]
    # A clock past the worker's ceiling: INVALID_REQUEST, returned as data.
    header.append(run_signature("() => 1", timeout=10**9, on_fault="return", app=canvas.app))
    summary = run_signature(
        """(results) => ({
            total: results.filter(r => !r.fault).reduce((a, r) => a + r.result, 0),
            faults: results.filter(r => r.fault).map(r => [r.fault.code, r.fault.retryable, r.fault.started]),
        })""",
        app=canvas.app,
    )
    result = chord(header)(summary).get(timeout=RESULT_TIMEOUT_S)
    assert result["result"] == {"total": 55, "faults": [["INVALID_REQUEST", False, False]]}


def test_a_group_collects_results_in_order(canvas: CanvasFleet) -> None:
    results = group(run_signature("(n) => n", inputs=n, app=canvas.app) for n in range(8)).apply_async()
    assert [r["result"] for r in results.get(timeout=RESULT_TIMEOUT_S)] == list(range(8))


def test_a_raised_fault_carries_its_fields_through_the_json_backend_and_fires_link_error(
    canvas: CanvasFleet,
) -> None:
    errback_id = uuid.uuid4().hex
    errback = run_signature("() => 'the errback ran'", immutable=True, app=canvas.app).set(task_id=errback_id)
    sig = run_signature("() => 1", timeout=10**9, app=canvas.app, link_error=errback)
    async_result = sig.apply_async()
    with pytest.raises(CanvasFault) as info:
        async_result.get(timeout=RESULT_TIMEOUT_S)
    fault = info.value
    assert (fault.code, fault.retryable, fault.started) == ("INVALID_REQUEST", False, False)
    assert str(fault) == f"INVALID_REQUEST: {fault.message}" and fault.message
    assert fault_of(async_result.result) is not None
    errback_result = canvas.app.AsyncResult(errback_id).get(timeout=RESULT_TIMEOUT_S)
    assert errback_result["result"] == "the errback ran"


def test_worker_crashed_before_the_program_started_is_retried_by_celery(canvas: CanvasFleet) -> None:
    code = f"/*canvas-fault:before-start:{canvas.token()}*/ () => 'served on the retry'"
    result = run_signature(code, app=canvas.app).apply_async().get(timeout=RESULT_TIMEOUT_S)
    assert result["result"] == "served on the retry"
    assert result["attempts"] == 2


def test_worker_crashed_after_the_program_started_is_not_retried_unless_idempotent(
    canvas: CanvasFleet,
) -> None:
    code = f"/*canvas-fault:after-start:{canvas.token()}*/ () => 'ran'"
    with pytest.raises(CanvasFault) as info:
        run_signature(code, app=canvas.app).apply_async().get(timeout=RESULT_TIMEOUT_S)
    assert (info.value.code, info.value.retryable, info.value.started) == ("WORKER_CRASHED", True, True)
    assert info.value.attempts == 1  # rebuilt by Celery's result backend with its count
    idempotent = f"/*canvas-fault:after-start:{canvas.token()}*/ () => 'ran again'"
    result = (
        run_signature(idempotent, idempotent=True, app=canvas.app).apply_async().get(timeout=RESULT_TIMEOUT_S)
    )
    assert result["result"] == "ran again" and result["attempts"] == 2


def test_a_try_delivered_again_after_it_was_claimed_never_runs_its_program_twice(canvas: CanvasFleet) -> None:
    """What a worker that died mid-run leaves behind: its try's claim. The restored message
    (here: one sent with the same task id) ends with WORKER_CRASHED, started=True."""
    task_id = uuid.uuid4().hex
    client = redis.Redis.from_url(canvas.settings.redis_url)
    try:
        client.set(f"{canvas.settings.key_prefix}:canvas:{{{task_id}}}:0", b"gone-worker", ex=600)
    finally:
        client.close()
    sig = run_signature("() => 'must not run'", on_fault="return", app=canvas.app)
    result = sig.apply_async(task_id=task_id).get(timeout=RESULT_TIMEOUT_S)
    fault = fault_of(result)
    assert fault is not None and (fault.code, fault.started) == ("WORKER_CRASHED", True)
    assert "gone-worker" in fault.message and result["result"] is None
    assert result["fault"]["attempts"] == 1 and "attempts" not in result


def test_a_fault_after_retries_counts_them_in_its_result() -> None:
    """What a job's last try returns: the tries in the fault and, as a served outcome's
    dict has it, beside it; a result written before faults had a count reads as one try."""
    lost = WorkerCrashed("lost", started=False)
    note_attempts(lost, 4)
    result = fault_result(CanvasFault.of(lost))
    assert result["attempts"] == 4 and result["fault"]["attempts"] == 4
    fault = fault_of(result)
    assert fault is not None and fault.attempts == 4 and fault.args[-1] == 4
    older: dict[str, object] = {
        "result": None,
        "error": "x",
        "logs": [],
        "fault": {"code": "QUEUE_FULL", "message": "x"},
    }
    again = fault_of(older)
    assert again is not None and again.attempts == 1
    assert CanvasFault("QUEUE_FULL", "x", True, False).attempts == 1


def test_a_malformed_job_is_a_fault_that_says_what_to_fix(canvas: CanvasFleet) -> None:
    sig = canvas.app.signature("codemode.run", kwargs={"code": "() => 1", "inptus": 3, "on_fault": "return"})
    result = sig.apply_async().get(timeout=RESULT_TIMEOUT_S)
    fault = fault_of(result)
    assert fault is not None and fault.code == "INVALID_REQUEST" and "inptus" in fault.message


def test_the_host_refuses_a_job_no_worker_would_run() -> None:
    with pytest.raises(InvalidRequest, match="on_fault"):
        run_signature("() => 1", on_fault="ignore")  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested
    with pytest.raises(InvalidRequest, match="JSON"):
        run_signature("() => 1", inputs={"when": object()})
    assert CanvasFault("QUEUE_FULL", "busy", True, False).args == ("QUEUE_FULL", "busy", True, False)


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        ("canvas_tools:not_a_registry", "is str, not a codemode.ToolRegistry"),
        ("no_such_module_here:registry", "cannot import 'no_such_module_here'"),
    ],
)
def test_a_worker_refuses_to_start_with_tools_that_name_no_registry(
    fleet: SharedFleet, tmp_path: Path, tools: str, said: str
) -> None:
    env = {
        **os.environ,
        **fleet.settings.env(),
        **WorkerSettings(tools=tools).env(),
        "PYTHONPATH": str(HERE),
    }
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{ENV_WORKER_TOOLS}={tools}" in done.stderr and said in done.stderr


def test_a_malformed_tools_setting_is_refused_before_anything_starts() -> None:
    with pytest.raises(SettingsError, match=r"package\.module:name"):
        WorkerSettings.from_env({ENV_WORKER_TOOLS: "canvas_tools.registry"})


def test_the_result_backend_must_be_a_redis_url_and_reaches_celerys_configuration() -> None:
    with pytest.raises(SettingsError, match="CODEMODE_RESULT_BACKEND"):
        BrokerSettings.from_env({"CODEMODE_RESULT_BACKEND": "rpc://"})
    assert BrokerSettings().celery_config()["result_backend"] is None
    url = "redis://127.0.0.1:6390/2"
    assert BrokerSettings.from_env({"CODEMODE_RESULT_BACKEND": url}).celery_config()["result_backend"] == url


def test_the_chord_example_fans_out_and_aggregates(canvas: CanvasFleet) -> None:
    """examples/canvas_chord.py, run as a script against the canvas worker (fewer programs
    than its default 1,000, to keep the test short)."""
    count = 120
    env = {**os.environ, **canvas.settings.env()}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "canvas_chord.py"), "--count", str(count)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    served = [n for n in range(count) if n % 100 != 99]
    cents = sum(round((n % 7 + 1) * 250 * 1.2) for n in served)
    assert summary == {"jobs": count, "totalCents": cents, "programErrors": 1, "retried": 0, "faults": {}}


DOC_MARK = "tests/fleet/test_canvas.py runs this block"


def doc_blocks() -> list[tuple[int, str]]:
    """The python blocks of docs/pipelines.md marked as run here: (fence line, source)."""
    lines = (ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8").split("\n")
    blocks = []
    for index, line in enumerate(lines):
        if DOC_MARK in line and lines[index + 1].strip() == "```python":
            end = lines.index("```", index + 2)
            blocks.append((index + 2, "\n".join(lines[index + 2 : end])))
    return blocks


def test_the_docs_mark_their_canvas_blocks() -> None:
    assert len(doc_blocks()) == 2


@pytest.mark.parametrize(("line", "source"), doc_blocks(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_the_pipelines_docs_canvas_blocks_run_on_the_fleet(
    canvas: CanvasFleet, line: int, source: str
) -> None:
    env = {**os.environ, **canvas.settings.env()}
    done = subprocess.run(
        [sys.executable, "-"], input=source, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"docs/pipelines.md, the block at line {line}:\n{done.stderr[-3000:]}"
