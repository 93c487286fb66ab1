"""The module inventories in the docs match the tree: docs/design.md's package table names every module
of its package, package docstrings name every module they hold, and every repository path the docs
and docstrings give exists. A module added, moved or removed without its line fails here."""
from __future__ import annotations

import ast
import pkgutil
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "op_plugin"
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
# Pages written from measurements at a date (profiler output names the modules of that day).
MEASURED = {"benchmarks.md", "performance-notes.md", "declared-cases.md"}


def _modules(folder: Path) -> list[str]:
    """Module and subpackage names directly in a package folder (not __init__)."""
    return sorted(info.name for info in pkgutil.iter_modules([str(folder)]))


def _design_rows() -> dict[str, str]:
    rows = {}
    for line in (ROOT / "docs" / "design.md").read_text().splitlines():
        found = re.match(r"\| `(_?\w+)` \|(.*)", line)
        if found:
            rows[found.group(1)] = found.group(2)
    return rows


def _named(name: str, text: str) -> bool:
    return re.search(rf"`{re.escape(name)}(\.py|/)?[`/ (.]", text) is not None


@pytest.mark.parametrize("package", ["_base", "_ge", "_spec", "_registry", "_lowering", "_backend", "_tools"])
def test_design_table_names_every_module_of_a_stage(package):
    row = _design_rows()[package]
    folder = PACKAGE / package
    if not folder.is_dir():
        return  # a module stage (_backend): its row names what it owns
    missing = [name for name in _modules(folder) if not _named(name, row)]
    assert not missing, f"docs/design.md's row of {package} does not name {missing}"


@pytest.mark.parametrize("part", ["hosting", "npu", "interpreter", "interpreter/executor"])
def test_design_table_names_every_module_of_the_simulator(part):
    row = _design_rows()["_simulator"]
    missing = [name for name in _modules(PACKAGE / "_simulator" / part) if not _named(name, row)]
    assert not missing, f"docs/design.md's row of _simulator does not name {part}/{missing}"


def _packages_with_inventories():
    """Packages whose __init__ docstring lists their modules: the kernel classes, the _tools families."""
    kernels = PACKAGE / "_simulator" / "interpreter" / "kernels"
    yield kernels
    yield from sorted(p for p in kernels.iterdir() if (p / "__init__.py").exists())
    tools = PACKAGE / "_tools"
    yield tools
    yield from sorted(p for p in tools.iterdir() if (p / "__init__.py").exists())


@pytest.mark.parametrize("folder", list(_packages_with_inventories()), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_package_docstring_names_every_module(folder):
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    missing = [name for name in _modules(folder) if not re.search(rf"\b{re.escape(name)}\b", doc)]
    assert not missing, f"{folder.relative_to(ROOT)}/__init__.py's docstring does not name {missing}"


_PATH = re.compile(r"(?<![\w/.])((?:op_plugin|tests|docs|bench|meta|converters|yaml)/[\w/.\-*]*[\w*])")


def _texts():
    for page in DOCS:
        if page.name not in MEASURED:
            yield page.relative_to(ROOT), page.read_text()
    for module in PACKAGE.rglob("*.py"):
        yield module.relative_to(ROOT), ast.get_docstring(ast.parse(module.read_text())) or ""


def test_every_repository_path_in_the_docs_exists():
    missing = []
    for where, text in _texts():
        for path in _PATH.findall(text):
            path = path.rstrip(".")
            if "*" in path or path.endswith(("/", "_")):  # a pattern (test_<family>.py, cut at the <)
                continue
            if not (ROOT / path).parent.is_dir():
                continue  # another repository's path (Ascend/op-plugin's op_plugin/ops/..., ops-nn's tests/assets)
            if not (ROOT / path).exists():
                missing.append(f"{where}: {path}")
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)
