"""The docs' examples do what the docs say (issue 25, item 11; issue 37, item 2).

Every ```python block of README.md and docs/*.md runs, as written, in a subprocess from a temporary
folder with a timeout, or is marked as not runnable with its reason. The marker is an HTML comment on
the line before the block:

    <!-- not-run: REASON -->        not run (an excerpt of op_plugin's own modules, a signature list, ...)
    <!-- append-to: NAME -->        the block continues the page's file NAME (below) and runs as part of it
    <!-- after: NAME -->            the block runs after the page's file NAME, in the same script
    <!-- files-from: PAGE.md -->    the block runs beside that page's files (e.g. the user guide's my_ops.yaml)

A page's files are its blocks (any language) whose first line names them, `# my_ops.yaml`, `# model.py`,
with their `append-to` blocks; each runs in a folder holding all of them, so `import my_ops` works. A
file that is a Python block runs once, whole. Any other comment before a block, or a block neither run
nor marked, fails `test_every_python_block_is_run_or_marked`: nothing is skipped silently.

Also: the user guide's YAML and Python pieces (sections 1-5) pass `op-plugin test`, backward included;
its error-format example is the real message, character for character; the accuracy-tools data-dump
block writes a dump.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
OP_PLUGIN = Path(sys.executable).with_name("op-plugin")
ENV = dict(os.environ, OP_PLUGIN_PROGRESS="0", PYTHONPATH=os.getcwd())
TIMEOUT = 600

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_FILE_NAME = re.compile(r"#\s*([\w.-]+\.(?:py|yaml|yml|json))\b")
_MARKER = re.compile(r"<!--\s*([\w-]+)\s*:\s*(.*?)\s*-->")
_KINDS = ("not-run", "append-to", "after", "files-from")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str
    marker: tuple[str, str] | None   # (kind, value) of the comment on the line before
    before: str                      # that line, as written

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def file(self) -> str | None:
        """The page file this block starts (`# my_ops.py` as its first line), or None."""
        match = _FILE_NAME.match(self.text.split("\n", 1)[0])
        return match.group(1) if match else None


def _blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        lines = text[:match.start()].rstrip("\n").splitlines()
        before = next((line.strip() for line in reversed(lines) if line.strip()), "")
        marker = _MARKER.fullmatch(before)
        found.append(Block(page, text[:match.start()].count("\n") + 1, match.group(1), match.group(2),
                           (marker.group(1), marker.group(2)) if marker else None, before))
    return found


def _page_files(page: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for block in _blocks(page):
        if block.file:
            files[block.file] = block.text
        elif block.marker and block.marker[0] == "append-to":
            files[block.marker[1]] = files[block.marker[1]] + "\n" + block.text
    return files


@dataclass(frozen=True)
class Run:
    """One subprocess: `script` run in a folder holding `files`."""

    id: str
    blocks: tuple[Block, ...]
    script: str
    files: tuple[tuple[str, str], ...]


def _runs() -> list[Run]:
    runs = []
    for page in PAGES:
        files = _page_files(page)
        python = [b for b in _blocks(page) if b.lang == "python"]
        for block in python:
            kind, value = block.marker or (None, None)
            if kind in ("not-run", "append-to"):
                continue   # checked by test_every_python_block_is_run_or_marked; appended ones run with their file
            folder = dict(files)
            if kind == "files-from":
                folder = {**_page_files(ROOT / value), **folder}
            if block.file:
                parts = (block,) + tuple(b for b in python if b.marker == ("append-to", block.file))
                runs.append(Run(f"{block.where} ({block.file})", parts, files[block.file], tuple(folder.items())))
            elif kind == "after":
                runs.append(Run(f"{block.where} (after {value})", (block,), files[value] + "\n" + block.text,
                                tuple(folder.items())))
            else:
                runs.append(Run(block.where, (block,), block.text, tuple(folder.items())))
    return runs


RUNS = _runs()


def test_every_python_block_is_run_or_marked():
    """Each ```python block is run by `test_the_example_runs`, or marked `not-run` with its reason; a marker
    names a kind this test knows and a file or page that exists."""
    run = {(b.page, b.line) for r in RUNS for b in r.blocks}
    problems = []
    for page in PAGES:
        files = _page_files(page)
        for block in _blocks(page):
            if block.before.startswith("<!--") and block.marker is None:
                problems.append(f"{block.where}: the comment before the block is no marker: {block.before}")
            kind, value = block.marker or (None, None)
            if block.marker and kind not in _KINDS:
                problems.append(f"{block.where}: unknown marker {kind!r} (known: {', '.join(_KINDS)})")
            if kind == "not-run" and not value:
                problems.append(f"{block.where}: `not-run` without a reason")
            if kind in ("append-to", "after") and value not in files:
                problems.append(f"{block.where}: {kind}: {value!r} is no file of this page ({sorted(files)})")
            if kind == "files-from" and not (ROOT / value).is_file():
                problems.append(f"{block.where}: files-from: no page {value}")
            if block.lang == "python" and kind != "not-run" and (block.page, block.line) not in run:
                problems.append(f"{block.where}: neither run nor marked not-run")
    assert not problems, "\n".join(problems)
    assert len(run) >= 15   # the README's, the user guide's and the other pages' runnable examples


@pytest.mark.parametrize("example", RUNS, ids=[r.id for r in RUNS])
def test_the_example_runs(example: Run, tmp_path):
    for name, text in example.files:
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "example_block.py").write_text(example.script, encoding="utf-8")
    result = subprocess.run([sys.executable, "example_block.py"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=TIMEOUT, env=ENV, check=False)
    assert result.returncode == 0, (f"{example.id} failed as written:\n{example.script}\n--- stdout:\n"
                                    f"{result.stdout[-2000:]}\n--- stderr:\n{result.stderr[-4000:]}")


def _user_guide_files(folder: Path) -> None:
    files = _page_files(DOCS / "user-guide.md")
    for name in ("my_ops.yaml", "my_ops.py"):
        (folder / name).write_text(files[name])


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
    """The block, then a compile with its backend: the dump is written, and a successful dump prints no
    `[ERROR]` line (issue 37, item 5: TorchAir's AclmdlSetDump is answered on a CPU host)."""
    block = next(b.text for b in _blocks(DOCS / "accuracy-tools.md")
                 if b.lang == "python" and "dump_config.enable_dump" in b.text)
    assert block.startswith("import op_plugin\n"), block
    script = block + "\nimport torch\nprint('OUT', torch.compile(lambda x: x.relu() + 1, backend=backend)" \
                     "(-torch.ones(2)).tolist())\n"
    (tmp_path / "block.py").write_text(script)
    result = subprocess.run([sys.executable, "block.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=ENV, check=False)
    assert result.returncode == 0 and "OUT [1.0, 1.0]" in result.stdout, result.stdout + result.stderr[-3000:]
    assert any(files for _, _, files in os.walk(tmp_path / "dump")), "the dump wrote nothing"
    assert "[ERROR]" not in result.stdout + result.stderr, result.stderr[-3000:]
