"""The package's import rules, checked on the import graph (every ``import`` of every module
under ``codemode/``, read with ``ast``; nothing is imported to check it).

* The installed library never imports the repository's deployment (``workers``,
  ``broker_config``) or its ``benchmarks``.
* The core never imports the fleet; the only exceptions are command-line entry points that
  load it lazily (inside a function), named in :data:`LAZY_FLEET_IMPORTS`.
* Inside the fleet, the host side and the worker side never import each other: they share
  only the wire, the errors, the settings and the Redis plumbing.
* Every module and class of the package stays small enough to read.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "codemode"

DEPLOYMENT = ("workers", "broker_config", "benchmarks")
"""Top-level packages of the repository that the library must not import."""

LAZY_FLEET_IMPORTS = {
    ("codemode.cli", "codemode.fleet.worker.cli"),  # codemode worker
    ("codemode._batch", "codemode.fleet"),  # codemode batch --fleet
    ("codemode.mcp._command", "codemode.fleet"),  # codemode mcp --fleet
    ("codemode.mcp._serve", "codemode.fleet"),  # the MCP server's fleet executor
}
"""(importer, imported): the core's only imports of the fleet, each inside a function."""

FLEET_SHARED = (
    "codemode.fleet.wire",
    "codemode.fleet.errors",
    "codemode.fleet.settings",
    "codemode.fleet.redis",
    "codemode.fleet.canvas",
    "codemode.fleet.signing",
)
"""What the fleet's host side and worker side may both import from the fleet."""

MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 330
"""About 300: a class over it does more than one job (the largest of loky is 419)."""

LARGE_MODULES: dict[str, str] = {}
"""Python modules allowed over MAX_MODULE_LINES, each with its reason: only generated
tables and conformance drivers may be. None is today: the guest JavaScript and the tables
generated into it are ``.js`` files (``codemode/stdlib/js/``), which this rule does not
measure, and the conformance driver (``codemode.conformance``) is under the bound."""


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    lazy: bool
    """Inside a function (loaded when called, not when the importer is) or for type
    checkers only (``if TYPE_CHECKING:``)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name a relative ``from`` import names."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imports_of(path: Path) -> Iterator[Import]:
    importer = module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))

    def visit(node: ast.AST, lazy: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.If) and ast.unparse(child.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                inner = True  # read by type checkers only
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(importer, alias.name, child.lineno, lazy)
            elif isinstance(child, ast.ImportFrom):
                base = resolve(importer, is_package, child.level, child.module)
                yield Import(importer, base, child.lineno, lazy)
                for alias in child.names:  # ``from . import x`` may import a module x
                    yield Import(importer, f"{base}.{alias.name}", child.lineno, lazy)
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "import_module"
                and child.args
                and isinstance(child.args[0], ast.Constant)
                and isinstance(child.args[0].value, str)
            ):
                yield Import(importer, child.args[0].value, child.lineno, lazy)
            yield from visit(child, inner)

    yield from visit(tree, False)


def all_imports() -> list[Import]:
    return [imp for path in sorted(PACKAGE.rglob("*.py")) for imp in imports_of(path)]


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_library_never_imports_the_deployment_or_the_benchmarks() -> None:
    wrong = [i for i in all_imports() if any(within(i.imported, top) for top in DEPLOYMENT)]
    assert not wrong, "\n".join(f"{i.importer}:{i.line} imports {i.imported}" for i in wrong)


def test_the_core_never_imports_the_fleet_except_lazily_at_named_entry_points() -> None:
    wrong = [
        i
        for i in all_imports()
        if within(i.imported, "codemode.fleet")
        and not within(i.importer, "codemode.fleet")
        and not (i.lazy and any(i.importer == a and within(i.imported, b) for a, b in LAZY_FLEET_IMPORTS))
    ]
    assert not wrong, "\n".join(f"{i.importer}:{i.line} imports {i.imported}" for i in wrong)


@pytest.mark.parametrize("side", ["host", "worker"])
def test_the_fleets_host_and_worker_sides_share_only_the_wire_errors_settings_and_redis(side: str) -> None:
    package = f"codemode.fleet.{side}"
    wrong = [
        i
        for i in all_imports()
        if within(i.importer, package)
        and within(i.imported, "codemode.fleet")
        and not within(i.imported, package)
        and not any(within(i.imported, shared) for shared in FLEET_SHARED)
    ]
    assert not wrong, "\n".join(f"{i.importer}:{i.line} imports {i.imported}" for i in wrong)


def test_the_shared_fleet_modules_import_neither_side() -> None:
    wrong = [
        i
        for i in all_imports()
        if any(within(i.importer, shared) for shared in FLEET_SHARED)
        and any(within(i.imported, f"codemode.fleet.{side}") for side in ("host", "worker"))
    ]
    assert not wrong, "\n".join(f"{i.importer}:{i.line} imports {i.imported}" for i in wrong)


def test_the_rules_see_what_they_look_for() -> None:
    """The checks above find nothing; this one shows they would: the parser sees the lazy
    entry points it allows, and both sides' imports of the shared modules."""
    found = {(i.importer, i.imported) for i in all_imports() if i.lazy}
    assert ("codemode.cli", "codemode.fleet.worker.cli") in found
    imported = {i.imported for i in all_imports() if within(i.importer, "codemode.fleet.worker")}
    assert "codemode.fleet.redis.link" in imported and "codemode.fleet.wire" in imported
    assert "codemode._executor" in imported  # relative imports resolved against the package
    hosts = {i.imported for i in all_imports() if i.importer == "codemode.fleet.host.client"}
    assert "codemode.fleet.host.connection" in hosts and "codemode.fleet.settings" in hosts


def test_the_distribution_installs_the_library_alone() -> None:
    """``workers`` and ``broker_config`` are the repository's (generic names that would clash
    with a user's own), not installed packages; the Lua scripts travel as package data."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = pyproject["tool"]["setuptools"]
    assert setuptools["packages"]["find"]["include"] == ["codemode*"]
    assert "fleet/redis/lua/*.lua" in setuptools["package-data"]["codemode"]
    assert sorted(p.name for p in (PACKAGE / "fleet" / "redis" / "lua").glob("*.lua"))


def sizes() -> tuple[dict[str, int], dict[str, int]]:
    """Lines of every module of the package, and of every class (by qualified name)."""
    modules: dict[str, int] = {}
    classes: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        name = module_name(path)
        modules[name] = source.count("\n")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                classes[f"{name}.{node.name}"] = node.end_lineno - node.lineno + 1
    return modules, classes


def test_every_module_and_class_stays_small() -> None:
    modules, classes = sizes()
    big = [f"{name}: {lines} lines" for name, lines in modules.items() if lines > MAX_MODULE_LINES]
    big = [line for line in big if line.split(":")[0] not in LARGE_MODULES]
    big += [f"{name}: {lines} lines" for name, lines in classes.items() if lines > MAX_CLASS_LINES]
    assert not big, big


def test_the_size_rule_sees_the_whole_package_and_its_exceptions_are_needed() -> None:
    modules, classes = sizes()
    # The core, the child runtime and the fleet are all measured, classes included.
    assert {"codemode._executor", "codemode._host.child", "codemode._child.engine"} <= modules.keys()
    assert "codemode.fleet.host.client.FleetExecutor" in classes
    assert classes["codemode._host.child.ChildProcess"] > 100
    stale = [name for name in LARGE_MODULES if modules.get(name, 0) <= MAX_MODULE_LINES]
    assert not stale, f"no longer over {MAX_MODULE_LINES} lines (or gone): {stale}"
