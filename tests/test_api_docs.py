"""The API reference builds from the docstrings (``scripts/api-docs``, docs/api.md) and has
an entry for every public name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import codemode

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    shutil.which("pdoc", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    is None,
    reason="pdoc is not installed (it comes with the test extra)",
)
def test_the_api_reference_builds_with_every_public_name(tmp_path: Path) -> None:
    out = tmp_path / "api"
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "api-docs"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    page = (out / "codemode.html").read_text(encoding="utf-8")
    missing = [name for name in codemode.__all__ if f'id="{name}"' not in page]
    assert missing == [], f"no entry in the API reference for {missing}"
    for package in ("tools", "mcp", "fleet"):
        assert (out / "codemode" / f"{package}.html").is_file(), package
    assert (out / "index.html").is_file()
