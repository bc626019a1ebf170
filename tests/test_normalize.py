"""normalize_code: model output -> the entry form, checked as text and by running it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode import SyncIsolateExecutor, normalize_code


@pytest.fixture(scope="module")
def executor() -> Iterator[SyncIsolateExecutor]:
    ex = SyncIsolateExecutor(pool={"max_workers": 1})
    try:
        yield ex
    finally:
        ex.dispose()


FENCE = "```"

# (id, model output, exact entry form or None to skip the text check, value it evaluates to)
CASES: list[tuple[str, str, str | None, object]] = [
    # already the entry form: unchanged
    ("arrow", "async () => 6 * 7", "async () => 6 * 7", 42),
    ("sync-arrow", "() => 42", "() => 42", 42),
    ("parenthesized-arrow", "(async () => 42)", "(async () => 42)", 42),
    (
        "block-arrow",
        "async () => {\n  return [1, 2]\n}",
        "async () => {\n  return [1, 2]\n}",
        [1, 2],
    ),
    ("anonymous-function", "function () { return 7 }", "function () { return 7 }", 7),
    ("arrow-trailing-comment", "async () => 1 // one", "async () => 1 // one", 1),
    ("arrow-semicolon", "async () => 5;", "async () => 5", 5),
    # fenced blocks
    ("fence-js", f"{FENCE}js\nasync () => 6 * 7\n{FENCE}", "async () => 6 * 7", 42),
    (
        "fence-javascript",
        f"{FENCE}javascript\nreturn 6 * 7\n{FENCE}",
        "async () => { return 6 * 7 }",
        42,
    ),
    ("fence-bare", f"{FENCE}\n6 * 7\n{FENCE}", "async () => (6 * 7)", 42),
    ("fence-ts-plain-js", f"{FENCE}ts\nasync () => 3\n{FENCE}", "async () => 3", 3),
    ("fence-typescript", f"{FENCE}typescript\nreturn 4\n{FENCE}", "async () => { return 4 }", 4),
    ("fence-uppercase-tag", f"{FENCE}JavaScript\n8\n{FENCE}", "async () => (8)", 8),
    ("fence-info-string", f"{FENCE}js title=main.js\n9\n{FENCE}", "async () => (9)", 9),
    (
        "fence-tag-with-file",
        f"{FENCE}javascript:main.js\nreturn 14\n{FENCE}",
        "async () => { return 14 }",
        14,
    ),
    ("fence-tag-braces", f"{FENCE}{{.js}}\nreturn 15\n{FENCE}", "async () => { return 15 }", 15),
    ("fence-tilde", "~~~js\nreturn 10\n~~~", "async () => { return 10 }", 10),
    ("fence-indented", f"  {FENCE}js\n  async () => 11\n  {FENCE}", "async () => 11", 11),
    ("fence-unclosed", f"{FENCE}js\nasync () => 12", "async () => 12", 12),
    (
        "prose-around-fence",
        f"Here's the code:\n\n{FENCE}js\nconst a = 1\na + 1\n{FENCE}\n\nIt adds one.",
        "async () => {\nconst a = 1\nreturn (a + 1)\n}",
        2,
    ),
    ("label-like-prose", f"Answer:\n{FENCE}js\n1 + 1\n{FENCE}", "async () => (1 + 1)", 2),
    (
        "first-js-fence-wins",
        f"Install:\n{FENCE}bash\nnpm i\n{FENCE}\nThen:\n{FENCE}js\nreturn 'js'\n{FENCE}\n"
        f"{FENCE}js\nreturn 'second'\n{FENCE}",
        "async () => { return 'js' }",
        "js",
    ),
    (
        "tagged-beats-bare",
        f"{FENCE}\nnpm test\n{FENCE}\n{FENCE}javascript\nreturn 'tagged'\n{FENCE}",
        "async () => { return 'tagged' }",
        "tagged",
    ),
    (
        "fence-line-in-block-comment-inside-fence",
        f"{FENCE}js\nasync () => {{\n  /* usage:\n{FENCE}\n  */\n  return 13\n}}\n{FENCE}",
        "async () => {\n  /* usage:\n```\n  */\n  return 13\n}",
        13,
    ),
    # a leading return
    ("return", "return 6 * 7", "async () => { return 6 * 7 }", 42),
    ("return-semicolon", "return 6 * 7;", "async () => { return 6 * 7; }", 42),
    (
        "return-after-statements",
        "const xs = [1, 2, 3]\nreturn xs.map((x) => x * 2)",
        "async () => {\nconst xs = [1, 2, 3]\nreturn xs.map((x) => x * 2)\n}",
        [2, 4, 6],
    ),
    (
        "return-then-expression",
        "if (false) return 1\n2",
        "async () => {\nif (false) return 1\nreturn (2)\n}",
        2,
    ),
    # export default
    ("export-default-expression", "export default 6 * 7", "async () => (6 * 7)", 42),
    (
        "export-default-async-function",
        "export default async function name() { return 42 }",
        "async function name() { return 42 }",
        42,
    ),
    ("export-default-arrow", "export default async () => 42;", "async () => 42", 42),
    (
        "export-default-anonymous",
        "export default function () { return 1 }",
        "function () { return 1 }",
        1,
    ),
    (
        "export-default-after-statements",
        "const x = 2\nexport default async function main() { return x * 21 }",
        "async () => {\nconst x = 2\nasync function main() { return x * 21 }\nreturn main();\n}",
        42,
    ),
    ("export-default-value-after-statements", "const x = 2\nexport default x * 3", None, 6),
    ("export-default-identifier", "const f = () => 5\nexport default f", None, 5),
    (
        "named-exports",
        "export const a = 1\nexport function b() { return 2 }\nexport { a }\na + b()",
        None,
        3,
    ),
    # a bare expression
    ("bare-expression", "6 * 7", "async () => (6 * 7)", 42),
    ("bare-expression-semicolon", "6 * 7;", "async () => (6 * 7)", 42),
    ("bare-expression-comment", "6 * 7 // the answer", "async () => (\n6 * 7 // the answer\n)", 42),
    ("bare-object", "{a: 1}", "async () => ({a: 1})", {"a": 1}),
    ("bare-json", '{"a": [1, 2]}', 'async () => ({"a": [1, 2]})', {"a": [1, 2]}),
    ("bare-string", "'hello'", "async () => ('hello')", "hello"),
    ("iife", "(async () => { return 1 })()", "async () => ((async () => { return 1 })())", 1),
    # a named function declaration
    (
        "named-async-function",
        "async function main() { return 42 }",
        "async function main() { return 42 }",
        42,
    ),
    (
        "named-function",
        "function answer() {\n  return 42\n}",
        "function answer() {\n  return 42\n}",
        42,
    ),
    (
        "helpers-then-function",
        "function helper() { return 2 }\nasync function main() { return helper() * 3 }",
        "async () => {\nfunction helper() { return 2 }\n"
        "async function main() { return helper() * 3 }\nreturn main();\n}",
        6,
    ),
    ("declared-then-called", "async function main() { return 1 }\nmain()", None, 1),
    # statements ending in an expression
    (
        "statements-expression",
        "const a = 1; a + 1",
        "async () => { const a = 1; return (a + 1) }",
        2,
    ),
    (
        "statements-expression-semicolon",
        "const a = 1; a + 1;",
        "async () => { const a = 1; return (a + 1); }",
        2,
    ),
    (
        "statements-expression-comment",
        "const a = 1\na + 1 // done",
        "async () => {\nconst a = 1\nreturn (a + 1) // done\n}",
        2,
    ),
    ("only-final-expression-returns", "let n = 0\nn += 5\nn * 2", None, 10),
    (
        "statements-no-expression",
        "for (const i of [1]) {}",
        "async () => { for (const i of [1]) {} }",
        None,
    ),
    ("final-arrow-is-called", "const f = () => 7\nasync () => f() * 6", None, 42),
    ("sequence-final", "let a = 1; a++, a", None, 2),
    ("nested-expression-untouched", "const f = () => { 99 }\nf()", None, None),
    # top-level await
    ("await-expression", "await Promise.resolve(3)", "async () => (await Promise.resolve(3))", 3),
    ("await-statements", "const v = await Promise.resolve(3); v * 2", None, 6),
    (
        "await-loop",
        "let t = 0\nfor (const x of [1, 2]) { t += await Promise.resolve(x) }\nt",
        None,
        3,
    ),
    # strings, comments and templates holding `return`, `export` or a fence
    (
        "return-in-string",
        "const s = 'return 1'; s",
        "async () => { const s = 'return 1'; return (s) }",
        "return 1",
    ),
    (
        "export-in-template",
        "`export default ${6 * 7}`",
        "async () => (`export default ${6 * 7}`)",
        "export default 42",
    ),
    ("return-in-comment", "// return 5\n6", "async () => (\n// return 5\n6\n)", 6),
    (
        "fence-in-block-comment",
        f"/*\n{FENCE}js\nreturn 9\n{FENCE}\n*/\nasync () => 1",
        f"/*\n{FENCE}js\nreturn 9\n{FENCE}\n*/\nasync () => 1",
        1,
    ),
    ("fence-in-template", "const md = `\n\\`\\`\\`js\nx\n\\`\\`\\`\n`\nmd.length", None, 13),
    ("fence-in-string", 'const f = "```js"; f', None, "```js"),
    ("hashbang", "#!/usr/bin/env node\n42", "async () => (\n42\n)", 42),
    # prose that a tokenizer would read as a comment or a string does not hide the fence
    (
        "glob-in-prose",
        f"Match src/**/*.js like this:\n{FENCE}js\n/** doc */\nasync () => 1\n{FENCE}",
        "/** doc */\nasync () => 1",
        1,
    ),
    (
        "comment-opener-in-prose",
        f"Don't write /* here:\n{FENCE}js\n/* doc */\nasync () => 2\n{FENCE}",
        "/* doc */\nasync () => 2",
        2,
    ),
    # line endings and a byte order mark do not change the program
    (
        "crlf",
        f"Here:\r\n{FENCE}js\r\nconst a = 1\r\na + 1\r\n{FENCE}\r\nok",
        "async () => {\nconst a = 1\nreturn (a + 1)\n}",
        2,
    ),
    ("byte-order-mark", "\ufeffreturn 1", "async () => { return 1 }", 1),
    # imports become dynamic imports (the executor decides whether the specifier resolves)
    # and are checked as text below, not run.
]


@pytest.mark.parametrize(("source", "expected", "value"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_normalizes_and_runs(
    executor: SyncIsolateExecutor, source: str, expected: str | None, value: object
) -> None:
    normalized = normalize_code(source)
    if expected is not None:
        assert normalized == expected
    outcome = executor.execute(normalized)
    assert outcome.error is None, f"{normalized!r} failed: {outcome.error}"
    assert outcome.result == value


@pytest.mark.parametrize(("source", "expected", "value"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_idempotent(source: str, expected: str | None, value: object) -> None:
    once = normalize_code(source)
    assert normalize_code(once) == once


def test_unnormalized_fence_fails_in_executor(executor: SyncIsolateExecutor) -> None:
    # The seed's example: a fence handed straight over is not a function.
    outcome = executor.execute(f"{FENCE}js\nasync () => 6 * 7\n{FENCE}")
    assert outcome.error is not None
    assert executor.execute(normalize_code(f"{FENCE}js\nasync () => 6 * 7\n{FENCE}")).result == 42


def test_typescript_types_are_stripped_in_place(executor: SyncIsolateExecutor) -> None:
    """A model's TypeScript runs: its types become spaces (more in test_typestrip.py)."""
    source = f"{FENCE}ts\nconst x: number = 1\nx + 1\n{FENCE}"
    normalized = normalize_code(source)
    assert normalized == "async () => {\nconst x         = 1\nreturn (x + 1)\n}"
    assert executor.execute(normalized).result == 2


def test_not_javascript_is_wrapped_not_raised(executor: SyncIsolateExecutor) -> None:
    normalized = normalize_code("I cannot help with that.")
    outcome = executor.execute(normalized)
    assert outcome.error is not None


def test_imports_become_dynamic_imports() -> None:
    source = (
        "import { a as b, c } from 'lib'\nimport d from 'x'\nimport * as ns from 'y'\n"
        "import e, * as all from 'w'\nimport 'z'\n"
        "import data from './d.json' with { type: 'json' }\nb(d)"
    )
    assert normalize_code(source) == (
        "async () => {\n"
        "const { a: b, c } = await import('lib');\n"
        "const { default: d } = await import('x');\n"
        "const ns = await import('y');\n"
        "const all = await import('w'); const { default: e } = all;\n"
        "await import('z');\n"
        "const { default: data } = await import('./d.json', { with: { type: 'json' } });\n"
        "return (b(d))\n"
        "}"
    )


@pytest.mark.parametrize(
    "source",
    [
        "",
        "   ",
        "\n\t\r\n",
        "\ufeff",
        f"{FENCE}js\n{FENCE}",
        f"{FENCE}js\n   \n{FENCE}",
        "// nothing\n/* here */",
    ],
    ids=["empty", "spaces", "whitespace", "bom", "empty-fence", "blank-fence", "only-comments"],
)
def test_no_program_raises_value_error(source: str) -> None:
    with pytest.raises(ValueError, match=r"^There is no program to run|only comments"):
        normalize_code(source)


def test_empty_message_is_a_sentence() -> None:
    with pytest.raises(ValueError) as info:
        normalize_code("  ")
    message = str(info.value)
    assert message[0].isupper() and message.endswith(".")
    assert "empty" in message


def test_other_language_fences_raise() -> None:
    with pytest.raises(ValueError, match=r"other languages \(python\)"):
        normalize_code(f"Here:\n{FENCE}python\nprint(1)\n{FENCE}")


def test_non_string_raises_type_error() -> None:
    with pytest.raises(TypeError):
        normalize_code(b"6 * 7")  # type: ignore[arg-type]  # wrong on purpose: its refusal is tested


def test_fast() -> None:
    program = "const rows = [1, 2, 3]\n" + "let t = 0; for (const r of rows) { t += r }\n" * 60 + "t"
    fenced = f"Here you go:\n{FENCE}js\n{program}\n{FENCE}\nDone."
    normalize_code(fenced)
    start = time.perf_counter()
    for _ in range(20):
        normalize_code(fenced)
        normalize_code("async () => 6 * 7")
    per_call = (time.perf_counter() - start) / 40
    # A bound on the order of growth (a parse, not a quadratic scan), generous for a loaded
    # machine; how fast it is belongs in benchmarks/.
    assert per_call < 0.05, f"{per_call * 1000:.2f} ms per call"


def test_the_entry_form_check_keeps_answers_for_short_programs_only() -> None:
    """Its answers are kept per program (a program run again is not parsed again), but not
    for long ones: a stream of distinct 8 MiB programs must not pile up in the host."""
    from codemode._source.normalize import _kept_entry_form_problem, entry_form_problem

    _kept_entry_form_problem.cache_clear()
    assert entry_form_problem("1) || (2") is True
    assert entry_form_problem("1) || (2") is True
    assert entry_form_problem("async () => 6 * 7") is False
    kept = _kept_entry_form_problem.cache_info()
    assert (kept.hits, kept.currsize) == (1, 2)
    padding = "// " + "x" * 70_000 + "\n"
    assert entry_form_problem(padding + "1) || (2") is True
    assert entry_form_problem(padding + "async () => 6 * 7") is False
    assert _kept_entry_form_problem.cache_info().currsize == 2


_PIECES = st.sampled_from(
    [
        *"`~\n ;{}()[]'\"/*=>+-.,:!?#\\",
        "return",
        "export",
        "default",
        "async",
        "function",
        "import",
        "await",
        "x",
        "1",
        "js",
        "from",
        "```js\n",
        "\n```\n",
        "const ",
        "é",
        "\U0001f600",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(_PIECES, max_size=30).map("".join)))
def test_any_text_gives_a_string_or_value_error(text: str) -> None:
    try:
        out = normalize_code(text)
    except ValueError:
        return
    assert isinstance(out, str) and out.strip()


@settings(max_examples=60, deadline=None)
@given(
    st.integers(-1000, 1000),
    st.integers(-1000, 1000),
    st.sampled_from(["", "js", "javascript", "ts"]),
)
def test_arithmetic_in_any_wrapping(executor: SyncIsolateExecutor, a: int, b: int, tag: str) -> None:
    # A module-scoped fixture inside @given is fine: the executor holds no per-example state.
    for form in (
        f"{a} * {b}",
        f"return {a} * {b}",
        f"export default {a} * {b}",
        f"const p = {a} * {b}; p",
    ):
        text = f"{FENCE}{tag}\n{form}\n{FENCE}"
        assert executor.execute(normalize_code(text)).result == a * b


def test_docstring_examples() -> None:
    import doctest

    import codemode._source.normalize as module

    failures, tried = doctest.testmod(module, raise_on_error=False, verbose=False)
    assert tried >= 8
    assert failures == 0
