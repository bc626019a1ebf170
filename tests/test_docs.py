"""Every ```python block in docs/*.md runs, each in a fresh interpreter.

A block opts out with ``<!-- no-test -->`` (optionally ``<!-- no-test: why -->``) on the line
right before its fence. Blocks are not joined: each one must stand alone, the way a reader
copies it. A block runs with the repository root as its working directory, through ``exec``
of code compiled under the Markdown file's name with its real line numbers, so a traceback
points into the document (``docs/x.md, line 42``). Top-level ``await`` is allowed: such a
block runs under ``asyncio.run``.

A failure names the file and the line of the block's opening fence, then shows the block's
stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK_TIMEOUT_S = 120

_PYTHON_TAGS = frozenset({"python", "py", "python3"})
_OPENER = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")
_NO_TEST = re.compile(r"^\s*<!--\s*no-test\b[^>]*-->\s*$")

# The driver each block runs under: read the block, compile it as the Markdown file with the
# block's own line numbers, exec it in a fresh namespace (awaiting it if it awaits).
_DRIVER = r"""
import ast, asyncio, sys, types
path, first_line = sys.argv[1], int(sys.argv[2])
source = "\n" * (first_line - 1) + sys.stdin.read()
code = compile(source, path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
namespace = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__}
if code.co_flags & 0x80:  # CO_COROUTINE: the block awaits at top level
    asyncio.run(types.FunctionType(code, namespace)())
else:
    exec(code, namespace)
"""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    source: str
    skipped: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_absolute() else self.path}:{self.line}"


def extract_blocks(path: Path, text: str) -> list[Block]:
    """Every fenced block tagged python in ``text`` (CommonMark-style fences).

    A fence closes on a line of the same character at least as long as the opener; an
    unclosed fence runs to the end. An indented fence (inside a list item) has that
    indentation removed from its lines.
    """
    lines = text.split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = _OPENER.match(lines[index])
        if match is None:
            index += 1
            continue
        fence, indent = match.group("fence"), match.group("indent")
        info = match.group("info").strip()
        if fence[0] == "`" and "`" in info:
            index += 1  # an inline code span, not a fence
            continue
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        tag = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        if tag in _PYTHON_TAGS:
            body = [
                line[len(indent) :] if line.startswith(indent) else line.lstrip()
                for line in lines[index + 1 : end]
            ]
            skipped = index > 0 and _NO_TEST.match(lines[index - 1]) is not None
            blocks.append(Block(path, index + 1, "\n".join(body) + "\n", skipped))
        index = end + 1
    return blocks


def _all_blocks() -> list[Block]:
    found: list[Block] = []
    for path in sorted(DOCS.glob("*.md")):
        found.extend(extract_blocks(path, path.read_text(encoding="utf-8")))
    return found


BLOCKS = _all_blocks()


def run_block(block: Block) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _DRIVER, str(block.path.relative_to(ROOT)), str(block.line + 1)],
        input=block.source,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"},
    )


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where.removeprefix("docs/") for b in BLOCKS])
def test_docs_block(block: Block) -> None:
    if block.skipped:
        pytest.skip(f"{block.where} is marked <!-- no-test -->")
    try:
        proc = run_block(block)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: the ```python block did not finish in {BLOCK_TIMEOUT_S} s")
    if proc.returncode != 0:
        pytest.fail(
            f"{block.where}: the ```python block starting on line {block.line} failed "
            f"(exit status {proc.returncode}).\n--- stderr ---\n{proc.stderr}"
            f"--- stdout ---\n{proc.stdout}",
            pytrace=False,
        )


# ---- the runner itself -------------------------------------------------------------------

_SAMPLE = """# Title

```python
x = 1
```

<!-- no-test: needs a server -->
```python
import nowhere
```

```js
not python
```

~~~~py title="t.py"
```
still inside
```
~~~~

1. A list:

   ```python
   if True:
       y = 2
   ```

```python
unclosed = True
"""


def test_extract_blocks() -> None:
    blocks = extract_blocks(Path("docs/sample.md"), _SAMPLE)
    assert [(b.line, b.skipped) for b in blocks] == [
        (3, False),
        (8, True),
        (16, False),
        (24, False),
        (29, False),
    ]
    assert blocks[0].source == "x = 1\n"
    assert blocks[2].source == "```\nstill inside\n```\n"
    assert blocks[3].source == "if True:\n    y = 2\n"
    assert blocks[4].source == "unclosed = True\n\n"
    assert blocks[0].where == "docs/sample.md:3"


def test_failure_points_into_the_document(tmp_path: Path) -> None:
    doc = ROOT / "docs" / "sample.md"  # only used for its name; nothing is written there
    block = Block(doc, 10, "a = 1\nraise ValueError('boom')\n", False)
    proc = run_block(block)
    assert proc.returncode == 1
    assert 'File "docs/sample.md", line 12' in proc.stderr
    assert "ValueError: boom" in proc.stderr


def test_top_level_await_runs() -> None:
    source = "import asyncio\nawait asyncio.sleep(0)\nassert __name__ == '__main__'\n"
    proc = run_block(Block(ROOT / "docs" / "sample.md", 1, source, False))
    assert proc.returncode == 0, proc.stderr


def test_fresh_namespace_per_block() -> None:
    first = run_block(Block(ROOT / "docs" / "sample.md", 1, "leak = 1\n", False))
    second = run_block(Block(ROOT / "docs" / "sample.md", 5, "leak\n", False))
    assert first.returncode == 0
    assert second.returncode == 1 and "NameError" in second.stderr
