"""The module contract the executor's loader relies on."""

from __future__ import annotations

import re

from codemode.stdlib import MODULES, global_names, module_for, sources
from tests.stdlib.conftest import Guest


def test_every_global_in_exactly_one_module() -> None:
    names = global_names()
    assert len(names) == len(set(names))
    assert module_for("URL") == "url"


def test_sources_are_function_expressions() -> None:
    src = sources()
    assert set(src) == set(MODULES)
    for module_id, text in src.items():
        body = re.sub(r"^(\s*(//.*)?\n)*", "", text)
        assert body.startswith("(host) => {"), module_id
        assert text.rstrip().endswith("}"), module_id


def test_each_module_returns_exactly_its_globals(guest: Guest) -> None:
    for module_id, names in MODULES.items():
        got = guest.run(f"return Object.keys(__stdlibRequire({module_id!r}));")
        assert sorted(got) == sorted(names), module_id


def test_globals_are_lazy_and_non_enumerable(guest: Guest) -> None:
    out = guest.run(
        """
        const d = Object.getOwnPropertyDescriptor(globalThis, 'URL');
        const lazy = typeof d.get === 'function';
        const u = new URL('https://a.example/');
        const after = Object.getOwnPropertyDescriptor(globalThis, 'URL');
        return { lazy, data: 'value' in after, writable: after.writable,
                 enumerable: after.enumerable, configurable: after.configurable,
                 keys: Object.keys(globalThis).filter((k) => k === 'URL' || k === 'console'),
                 host: u.host };
        """
    )
    assert out == {
        "lazy": True,
        "data": True,
        "writable": True,
        "enumerable": False,
        "configurable": True,
        "keys": [],
        "host": "a.example",
    }


def test_guest_can_replace_a_global(guest: Guest) -> None:
    assert guest.run("globalThis.URL = 5; return URL;") == 5
    assert guest.run("globalThis.fetch = 'mine'; new Headers(); return fetch;") == "mine"


def test_absent_names_stay_absent(guest: Guest) -> None:
    out = guest.run("return [typeof process, typeof require, typeof Buffer, typeof WebSocket, typeof self];")
    assert out == ["undefined", "undefined", "undefined", "undefined", "object"]


def test_self_is_global_and_report_error_logs(guest: Guest) -> None:
    assert guest.run("return self === globalThis;") is True
    guest.run("reportError(new TypeError('bad thing')); return null;")
    logs = guest.logs()
    assert logs[0]["level"] == "error"
    assert logs[0]["text"].startswith("Uncaught TypeError: bad thing")


def _comment_only_lines(source: str) -> set[int]:
    """Line numbers (0-based) that tree-sitter sees as nothing but a comment."""
    import tree_sitter_javascript as tsjs
    from tree_sitter import Language, Parser

    tree = Parser(Language(tsjs.language())).parse(source.encode())
    lines = source.split("\n")
    found: set[int] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "comment" and node.start_point[0] == node.end_point[0]:
            row = node.start_point[0]
            assert node.text is not None  # parsed from bytes: every node keeps its text
            if lines[row].strip() == node.text.decode().strip():
                found.add(row)
        stack.extend(node.children)
    return found


def test_blanked_lines_are_only_comments() -> None:
    """Blanking must never touch a line of code or of a multi-line string."""
    from importlib import resources

    from codemode.stdlib import blank_comment_lines

    files = {f"stdlib/{m}.js": resources.files("codemode.stdlib").joinpath("js", f"{m}.js") for m in MODULES}
    files["runtime.js"] = resources.files("codemode._child").joinpath("runtime.js")
    for name, path in files.items():
        original = path.read_text(encoding="utf-8")
        blanked = blank_comment_lines(original)
        before, after = original.split("\n"), blanked.split("\n")
        assert len(before) == len(after), name  # line numbers are kept
        changed = {i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b}
        assert changed, name
        assert changed <= _comment_only_lines(original), name
