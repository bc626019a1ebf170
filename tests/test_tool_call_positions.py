"""A tool call that fails is placed at the call that made it: ``Outcome.error_detail`` gives
the line and column of the call (the tool's name) and the program's frames there, although
the error is made when the answer comes back, after the call returned (runtime.js, the tool
bridge's call sites)."""

from __future__ import annotations

import pytest

from codemode import SyncIsolateExecutor, ToolRegistry, normalize_code

tools = ToolRegistry()


@tools.tool("store", "order")
def order(user: str, qty: int) -> int:
    """Order ``qty`` for ``user``."""
    return qty


@tools.tool("store", "boom")
def boom(user: str) -> int:
    """Always fails."""
    raise ValueError(f"no such user {user}")


def where(text: str, needle: str, *, nth: int = 0) -> tuple[int, int]:
    """The 1-based line and column of ``needle`` (its ``nth`` occurrence) in ``text``."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def run(
    executor: SyncIsolateExecutor, code: str
) -> tuple[str | None, tuple[int | None, int | None], tuple[str, ...]]:
    outcome = executor.execute(code, providers=tools.providers(), dispatch=tools.dispatch)
    detail = outcome.error_detail
    assert detail is not None, outcome
    return outcome.error, (detail.line, detail.column), detail.stack


@pytest.mark.parametrize(
    ("code", "needle", "nth", "says"),
    [
        # arguments rejected before the tool ran
        (
            "async () => {\n  const a = await store.order('ada', 1);\n  return await store.order('ada', 'two');\n}",
            "order",
            1,
            "store.order was called with the wrong arguments",
        ),
        # the tool raised in the host
        (
            "async () => {\n  await store.order('ada', 1);\n  return await store.boom('ada');\n}",
            "boom",
            0,
            "The tool store.boom failed in the host (ValueError)",
        ),
        # no such tool
        ("async () => {\n\n  await store.nope();\n}", "nope", 0, "store.nope is not a tool this host serves"),
        # one of several calls in flight: the one that failed
        (
            "async () => {\n  await Promise.all([\n    store.order('a', 1),\n    store.boom('b'),\n  ]);\n}",
            "boom",
            0,
            "The tool store.boom failed",
        ),
    ],
)
def test_a_failed_call_is_placed_at_its_call(
    executor: SyncIsolateExecutor, code: str, needle: str, nth: int, says: str
) -> None:
    error, position, stack = run(executor, code)
    assert error is not None and error.startswith(says)
    line, column = where(code, needle, nth=nth)
    assert position == (line, column)
    assert stack[0] == f"at program:{line}:{column}"


def test_the_frames_are_the_programs_at_the_call(executor: SyncIsolateExecutor) -> None:
    code = "async () => {\n  async function place(qty) {\n    return store.order('ada', qty);\n  }\n  return await place('x');\n}"
    _, position, stack = run(executor, code)
    assert position == where(code, "order")
    assert stack == (
        f"at place (program:{position[0]}:{position[1]})",
        "at program:{}:{}".format(*where(code, "place('x')")),
    )


def test_positions_are_in_the_models_text(executor: SyncIsolateExecutor) -> None:
    answer = "Let me order it:\n\n```js\nconst n = 'two';\nreturn await store.order('ada', n);\n```"
    code = normalize_code(answer)
    _, position, _ = run(executor, code)
    assert position == where(answer, "order(")


def test_the_programs_own_view_of_the_error_is_unchanged(executor: SyncIsolateExecutor) -> None:
    outcome = executor.execute(
        "async () => { try { await store.boom('x') } catch (e) { return [e.name, e.message, e.stack.split('\\n')[0]] } }",
        providers=tools.providers(),
        dispatch=tools.dispatch,
    )
    name, message, head = outcome.result
    assert name == "Error" and message.startswith("The tool store.boom failed")
    assert head == f"Error: {message}"


def test_a_caught_and_rethrown_failure_keeps_its_call_site(executor: SyncIsolateExecutor) -> None:
    code = "async () => {\n  let failure;\n  try { await store.boom('x') } catch (e) { failure = e }\n  throw failure;\n}"
    _, position, _ = run(executor, code)
    assert position == where(code, "boom")


@pytest.mark.hostile
@pytest.mark.parametrize(
    "tampering",
    [
        "WeakMap.prototype.get = () => { throw new Error('tampered') };"
        " WeakMap.prototype.set = () => { throw new Error('tampered') };",
        "String.prototype.indexOf = () => 0; String.prototype.slice = () => 'tampered';",
        "Error.prepareStackTrace = () => 'formatted by the program';",
        "Error.stackTraceLimit = 0;",
    ],
)
def test_a_program_that_tampers_with_what_the_bridge_uses_still_gets_its_error(
    executor: SyncIsolateExecutor, tampering: str
) -> None:
    code = f"async () => {{\n  {tampering}\n  return await store.boom('ada');\n}}"
    outcome = executor.execute(code, providers=tools.providers(), dispatch=tools.dispatch)
    assert outcome.error is not None and outcome.error.startswith("The tool store.boom failed in the host")
    detail = outcome.error_detail
    assert detail is not None
    if "stackTraceLimit" in tampering:
        assert (detail.line, detail.column) == (None, None)  # no frames were kept
    else:
        assert (detail.line, detail.column) == where(code, "boom")
