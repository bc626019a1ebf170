"""Modules through the real executor: import() against the run's module map."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode import InvalidRequest, SyncIsolateExecutor
from codemode.texts import timeout_text

MODULES: dict[str, str | dict[str, object]] = {
    "lib/math": "export const add = (a, b) => a + b\nexport default function mul(a, b) { return a * b }\n",
    "lib/reexport": "export * from 'lib/math'\nexport { default as times } from 'lib/math'\n",
    "lib/ns": "import * as m from 'lib/math'\nexport const viaNs = m.add(2, 2)\n",
    "lib/util": {"type": "cjs", "source": "const d = require('lib/data')\nmodule.exports = { n: d.n }\n"},
    "lib/require-missing": {"type": "cjs", "source": "module.exports = require('fs')\n"},
    "lib/data": {"type": "json", "value": {"n": 5}},
    "lib/a": "import { b } from 'lib/b'\nexport const a = () => 'a' + b()\n",
    "lib/b": "import { a } from 'lib/a'\nexport const b = () => 'b'\nexport const useA = () => a()\n",
    "lib/counter": "export let evaluated = (globalThis.__evals = (globalThis.__evals || 0) + 1)\n",
    "lib/self": "import * as me from 'lib/self'\nexport const x = 1\nexport const y = () => me.x\n",
    "lib/bad": "export const x = 1\nexport const y = ;\n",
    "lib/thrower": "export function boom() {\n  throw new Error('boom from module')\n}\n",
    "lib/loop": "while (true) {}\n",
}


@pytest.fixture(scope="module")
def ex() -> Iterator[SyncIsolateExecutor]:
    executor = SyncIsolateExecutor(pool={"max_workers": 2}, modules=MODULES)
    yield executor
    executor.dispose()


def test_named_default_namespace_and_reexports(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        """async () => {
            const m = await import('lib/math');
            const r = await import('lib/reexport');
            const ns = await import('lib/ns');
            return [m.add(1, 2), m.default(3, 4), r.add(5, 5), r.times(2, 3), ns.viaNs];
        }"""
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == [3, 12, 10, 6, 4]


def test_cjs_require_and_json(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute("async () => (await import('lib/util')).default.n")
    assert outcome.result == 5
    missing = ex.execute("async () => { await import('lib/require-missing') }")
    assert missing.error == "Cannot find module 'fs'"


def test_cycles_and_evaluated_once(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        """async () => {
            const a = await import('lib/a');
            const b = await import('lib/b');
            await import('lib/counter'); await import('lib/counter');
            const self = await import('lib/self');
            return [a.a(), b.useA(), globalThis.__evals, self.y()];
        }"""
    )
    assert outcome.error is None, outcome.error
    assert outcome.result == ["ab", "ab", 1, 1]


def test_unknown_specifier_lists_what_can_be_imported(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute("async () => { await import('lodash') }")
    assert outcome.error is not None
    assert outcome.error.startswith("Cannot import 'lodash': this run can import 'lib/math'")
    none = ex.execute("async () => { await import('lodash') }", modules=None)
    assert (
        none.error == "Cannot import 'lodash': no modules were declared for this run (declare it in modules)."
    )


def test_a_syntax_error_names_the_module_and_position(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute("async () => { await import('lib/bad') }")
    assert outcome.error is not None
    assert outcome.error.startswith("SyntaxError in module 'lib/bad'")
    assert "2:" in outcome.error


def test_stack_traces_point_at_the_module_source(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        "async () => { const m = await import('lib/thrower'); try { m.boom() } catch (e) { return e.stack } }"
    )
    assert outcome.error is None
    assert "codemode:module/lib/thrower:2" in outcome.result


def test_import_in_strings_and_comments_is_untouched(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute(
        "async () => { /* import('lib/math') */ const s = `import('x')`; return [s, /import\\(/.source] }"
    )
    assert outcome.result == ["import('x')", "import\\("]


def test_hostile_modules_are_bounded(ex: SyncIsolateExecutor) -> None:
    outcome = ex.execute("async () => { await import('lib/loop') }", timeout=300)
    assert outcome.error == timeout_text(300)
    assert ex.execute("async () => (await import('lib/math')).add(1, 1)").result == 2


def test_malformed_modules_are_refused_before_anything_runs(ex: SyncIsolateExecutor) -> None:
    with pytest.raises(InvalidRequest) as info:
        ex.execute("async () => 1", modules={"lib/x": 42})  # type: ignore[dict-item]  # malformed on purpose
    assert "modules['lib/x']" in str(info.value)
