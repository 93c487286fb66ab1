"""The built wheel installs meta/, converters/ and yaml/ inside op_plugin, never as top-level names,
holds every package of the engine (the shipped reference kernels among them) and every hand-written
piece of the root folders."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _source_copy(folder: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore) copied to `folder`: setuptools
    builds through the source tree's build/, and a stale build/lib there (a module since moved or renamed)
    would end up in the wheel beside its successor, as a fresh clone never would."""
    import shutil

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): build in place
        return ROOT
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(_source_copy(out / "src"))], check=True, cwd=out)
    (built,) = out.glob("op_plugin-*.whl")
    return built


def test_wheel_layout(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "op_plugin/meta_functions/__init__.py" in names  # not op_plugin/meta: that is the decorator
    assert "op_plugin/converters/__init__.py" in names
    assert "op_plugin/reference_kernels/__init__.py" in names
    engine = {str(p.relative_to(ROOT)) for p in (ROOT / "op_plugin").rglob("*.py")}
    assert engine <= set(names), sorted(engine - set(names))
    for folder, package in (("meta", "op_plugin/meta_functions"), ("converters", "op_plugin/converters")):
        pieces = {f"{package}/{p.name}" for p in (ROOT / folder).glob("*.py")}
        assert len(pieces) > 1 and pieces <= set(names), (folder, sorted(pieces - set(names)))
    shipped = {Path(n).name for n in names if n.startswith("op_plugin/shipped_yaml/")}
    assert shipped == {p.name for p in (ROOT / "yaml").glob("*.yaml")}
    top_level = {n.split("/")[0] for n in names}
    # op_plugin_virtual_npu_autoload.py: the virtual NPU's `torch.backends` entry, tiny on purpose.
    expected = {"op_plugin", "op_plugin_virtual_npu_autoload.py"}
    assert {n for n in top_level if not n.endswith(".dist-info")} == expected, top_level
    assert "op_plugin/_simulator/device/csrc/virtual_npu.cpp" in names


def test_wheel_imports_and_registers_shipped_ops(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    code = (
        "import importlib.util, torch, op_plugin\n"
        "assert op_plugin.__file__.startswith(%r), op_plugin.__file__\n"
        "assert not any(importlib.util.find_spec(n) for n in ('meta', 'converters', 'kernels'))\n"
        "assert callable(op_plugin.meta) and callable(op_plugin.reference)\n"
        "import op_plugin.meta_functions, op_plugin.converters, op_plugin.reference_kernels\n"
        "print(len(op_plugin.shipped_yaml_files()), torch.ops.npu.npu_custom_linear.default)\n"
    ) % str(tmp_path / "site")
    # -P: do not put the working directory on sys.path; PYTHONPATH holds only the unpacked wheel.
    result = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == str(len(list((ROOT / "yaml").glob("*.yaml"))))


def test_make_setup_is_never_silent_for_long():
    """Issue 37, item 8: the first `make demo` spent minutes in quiet pip installs. Each set-up step says
    what it does before it starts, and the long installs (torch, the project) show pip's progress."""
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("$(STAMP): pyproject.toml Makefile\n", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in recipe.splitlines()]
    installs = [line for line in lines if "pip install" in line and "--upgrade pip" not in line]
    assert installs and not [line for line in installs if "--quiet" in line], installs
    steps = [line for line in lines if line.startswith('@echo "setup [')]
    assert len(steps) >= 5, steps
    commands = [line for line in lines if line and not line.startswith(("#", "@echo", "||"))]
    first_echo = lines.index(steps[0])
    assert lines.index(commands[0]) > first_echo   # a line before the first step's work
