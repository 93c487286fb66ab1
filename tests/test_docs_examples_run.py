"""Issue 25, item 11: the docs' examples do what the docs say. The user guide's YAML and Python
pieces (sections 1-5) pass `op-plugin test`, backward included; its error-format example is the
real message, character for character; the accuracy-tools data-dump block runs as written."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
OP_PLUGIN = Path(sys.executable).with_name("op-plugin")
ENV = dict(os.environ, OP_PLUGIN_PROGRESS="0", PYTHONPATH=os.getcwd())


def _blocks(text: str, lang: str) -> list[str]:
    return [body for found, body in re.findall(r"```(\w+)\n(.*?)```", text, re.S) if found == lang]


def _user_guide_files(folder: Path) -> None:
    page = (DOCS / "user-guide.md").read_text(encoding="utf-8")
    yaml = next(b for b in _blocks(page, "yaml") if b.startswith("# my_ops.yaml"))
    pieces = "\n".join(_blocks(page[page.index("## 2."):page.index("## 6.")], "python"))
    (folder / "my_ops.yaml").write_text(yaml)
    (folder / "my_ops.py").write_text(pieces)


def test_the_user_guide_ops_pass_op_plugin_test(tmp_path):
    _user_guide_files(tmp_path)
    result = subprocess.run([str(OP_PLUGIN), "test", "my_ops.yaml", "--python", "my_ops.py"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=900, env=ENV, check=False)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    layer_scale = next(line.split() for line in result.stdout.splitlines() if line.startswith("npu_layer_scale-0"))
    assert layer_scale[-1] == "ok", result.stdout   # the backward formula, against autograd


def test_the_user_guide_error_example_is_the_real_message(tmp_path):
    _user_guide_files(tmp_path)
    page = (DOCS / "user-guide.md").read_text(encoding="utf-8")
    quoted = next(line.strip() for line in page.splitlines() if line.strip().startswith("error: my_ops.yaml:"))
    good = (tmp_path / "my_ops.yaml").read_text()
    bad = good.replace("{size: x.shape, dtype: x}", '{size: "x.shape + eps", dtype: x}')
    (tmp_path / "my_ops.yaml").write_text(bad)
    result = subprocess.run([str(OP_PLUGIN), "validate", "my_ops.yaml"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env=ENV, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == quoted, (result.stderr, quoted)


def test_the_accuracy_tools_data_dump_block_runs_as_written(tmp_path):
    page = (DOCS / "accuracy-tools.md").read_text(encoding="utf-8")
    block = next(b for b in _blocks(page, "python") if "dump_config.enable_dump" in b)
    assert block.startswith("import op_plugin\n"), block
    (tmp_path / "dump").mkdir()
    script = block + "\nimport torch\nprint('OUT', torch.compile(lambda x: x.relu() + 1, backend=backend)" \
                     "(-torch.ones(2)).tolist())\n"
    (tmp_path / "block.py").write_text(script)
    result = subprocess.run([sys.executable, "block.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=ENV, check=False)
    assert result.returncode == 0 and "OUT [1.0, 1.0]" in result.stdout, result.stdout + result.stderr[-3000:]
    assert any(files for _, _, files in os.walk(tmp_path / "dump")), "the dump wrote nothing"
