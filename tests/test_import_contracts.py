"""The import contracts can fail: each one breaks when a probe import crosses it.

A contract that no import can break (because another one already implies it) guards nothing; each
probe below is a copy of op_plugin with one import added, checked by lint-imports against the one
contract it must break.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INTERPRETER = "op_plugin/_simulator/interpreter/errors.py"
PROBES = [
    # (contract id in pyproject.toml, module changed, the import added)
    ("interpreter-alone", INTERPRETER, "import torchair"),
    ("interpreter-alone", INTERPRETER, "from ..._spec import model"),
    ("interpreter-alone", INTERPRETER, "from ..._lowering import mapping"),
    ("interpreter-alone", INTERPRETER, "from ..._registry import library"),
    ("simulator-jobs", INTERPRETER, "from ..hosting import loader"),
    ("simulator-jobs", "op_plugin/_simulator/npu/dispatch.py", "from ..hosting import loader"),
    ("stages", "op_plugin/_lowering/mapping.py", "from .. import _simulator"),
    ("acyclic", "op_plugin/_simulator/interpreter/prepared.py", "from . import binding"),
]


def _lint(folder: Path, contract: str) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--no-cache", "--contract", contract], cwd=folder, capture_output=True,
                          text=True, timeout=300)


def test_every_contract_is_probed():
    ids = [line.split("=", 1)[1].strip().strip('"') for line in (ROOT / "pyproject.toml").read_text().splitlines()
           if line.startswith("id = ")]
    assert sorted(set(ids)) == sorted({contract for contract, _, _ in PROBES})


@pytest.mark.parametrize("contract, module, line", PROBES, ids=[f"{c}:{line}" for c, _, line in PROBES])
def test_a_probe_import_breaks_its_contract(tmp_path, contract, module, line):
    shutil.copytree(ROOT / "op_plugin", tmp_path / "op_plugin", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    assert _lint(tmp_path, contract).returncode == 0  # the copy is clean before the probe
    with open(tmp_path / module, "a", encoding="utf-8") as handle:
        handle.write(f"\n{line}  # probe\n")
    result = _lint(tmp_path, contract)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout
    assert line.split()[-1] in result.stdout  # the probe's import is the one named
