"""`op-plugin test FILE.yaml --python MODULE` and `op_plugin.testing.check_yaml_ops`: every check per
op x sample of a user's YAML, a summary table, exit 1 on failure; a specialising user Meta is
flagged with the size it pins. Also `op-plugin compare MODULE:FACTORY` end to end."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import op_plugin
from op_plugin import _registry, testing
from op_plugin._registry.load import parse_yaml, unload

DATA = Path(__file__).parent / "data" / "user_ops"
YAML = DATA / "user_ops.yaml"
PIECES = DATA / "user_ops_pieces.py"
OP_PLUGIN = Path(sys.executable).with_name("op-plugin")


def _cli(*args, cwd=DATA):
    env = dict(os.environ, OP_PLUGIN_PROGRESS="0")
    return subprocess.run([str(OP_PLUGIN), *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture
def unloads_user_ops():
    yield
    for spec in parse_yaml(YAML):
        if _registry.find(spec.qualname) and _registry.find(spec.qualname).spec:
            unload(spec.qualname)
        for piece in _registry.Piece:
            _registry.detach(spec.qualname, piece)


def test_cli_reports_each_op_and_sample_and_flags_the_specialising_meta():
    result = _cli("test", "user_ops.yaml", "--python", "user_ops_pieces.py")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["op", "x", "sample", "opcheck", "meta", "symbolic", "npugraph", "dynamic", "backward"]
    assert lines[1].split() == ["npu_utest_scaled_add-0", "ok", "ok", "ok", "ok", "ok", "ok"]
    assert lines[2].split() == ["npu_utest_row_means-0", "ok", "ok", "FAIL", "-", "-", "-"]
    assert "8 passed, 1 failed, 0 errors, 3 skipped" in result.stdout
    flagged = next(line for line in lines if line.startswith("FAIL npu_utest_row_means-0 [symbolic]"))
    assert "user-written Meta function specialises" in flagged and "x dim 1" in flagged
    assert "\r" not in result.stderr  # no progress bar when not on a terminal


def test_cli_passes_on_a_clean_op_and_refuses_a_bad_check_name():
    result = _cli("test", "user_ops.yaml", "--python", "user_ops_pieces.py", "--op", "npu_utest_scaled_add")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed, 0 failed" in result.stdout
    assert _cli("test", "user_ops.yaml", "--check", "nonsense").returncode == 2


def test_check_yaml_ops_for_a_users_pytest_suite(unloads_user_ops):
    with pytest.raises(AssertionError, match=r"(?s)npu_utest_row_means-0.*FAIL.*Eq\(s\d+, 3\) \(x dim 1\)"):
        testing.check_yaml_ops(YAML, python=[str(PIECES)])
    outcomes = testing.check_yaml_ops(YAML, ops=["npu_utest_scaled_add"], checks=["opcheck", "backward"])
    assert [(o.check, o.status) for o in outcomes] == [("opcheck", "pass"), ("backward", "pass")]
    (case,) = [c for c in testing.yaml_cases(YAML) if c.spec.name == "npu_utest_row_means"]
    with pytest.raises(AssertionError, match="specialises"):
        testing.CHECKS["symbolic"](case)


def test_wrong_backward_is_found(unloads_user_ops):
    testing.yaml_cases(YAML, python=[str(PIECES)])
    _registry.detach("npu::npu_utest_scaled_add", _registry.Piece.BACKWARD)
    op_plugin.backward("npu_utest_scaled_add")(lambda ctx, grad: (grad, 2 * grad))  # wrong for x2
    (case,) = [c for c in testing.yaml_cases(YAML) if c.spec.name == "npu_utest_scaled_add"]
    with pytest.raises(AssertionError, match="gradient of input 1"):
        testing.CHECKS["backward"](case)


COMPARE_MODEL = '''
import torch

def make():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    return model, (torch.randn(4, 8) * 2,)
'''


def test_compare_cli_json_and_picture(tmp_path):
    (tmp_path / "cmp_model.py").write_text(COMPARE_MODEL)
    clean = _cli("compare", "cmp_model:make", "--no-backward", "--json", "clean.json", cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads((tmp_path / "clean.json").read_text())["first_divergent"] is None
    gelu = _cli("compare", "cmp_model:make", "--no-backward", "--torchair-gelu", "--json", "gelu.json",
                "--picture", "gelu.svg", cwd=tmp_path)
    assert gelu.returncode == 1, gelu.stdout + gelu.stderr
    data = json.loads((tmp_path / "gelu.json").read_text())
    assert data["first_divergent"] == "gelu"
    assert "tanh approximation" in gelu.stdout
    assert (tmp_path / "gelu.dot").exists()
    assert "#ce93d8" in (tmp_path / "gelu.dot").read_text()  # coloured as a known difference


VIEW_MODEL = '''
import torch

class TransposeBackThenReshape(torch.nn.Module):
    def forward(self, x):
        y = x.transpose(1, 3) + 1
        return y.transpose(1, 3).reshape(-1, 3) * 2

def make():
    torch.manual_seed(0)
    return TransposeBackThenReshape(), (torch.randn(2, 3, 4, 5),)
'''


def test_compare_cli_shows_what_torchair_view_optimisation_gets_wrong(tmp_path):
    (tmp_path / "view_model.py").write_text(VIEW_MODEL)
    clean = _cli("compare", "view_model:make", "--no-backward", cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    broken = _cli("compare", "view_model:make", "--no-backward", "--torchair-view-optimize", "--json", "view.json",
                  cwd=tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert json.loads((tmp_path / "view.json").read_text())["first_divergent"] == "mul"


SHADOWING_YAML = """\
ops:
  - func: npu_utest_shadow(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    samples: [{x: [float32, [2, 3]]}]
"""
SHADOWING_PIECES = """\
import op_plugin

@op_plugin.reference("npu_utest_shadow")
def shadow(x):
    return x * 2

def dumps(*args, **kwargs):  # what the standard module would be replaced by
    raise RuntimeError("the user's {stem}.py was called instead of the standard module")

deepcopy = loads = dumps
"""


def test_a_python_file_named_like_a_standard_module_does_not_replace_it(tmp_path):
    """`--python path/json.py` (or copy.py) registered the file as `json`, replacing the standard
    module for the rest of the run; user files get private module names."""
    import copy as standard_copy

    from op_plugin._tools.user_tests.runner import import_user_module

    saved = {name: sys.modules[name] for name in ("json", "copy")}
    try:
        for stem in ("json", "copy"):
            (tmp_path / f"{stem}.py").write_text(SHADOWING_PIECES.replace("{stem}", stem).replace(
                "npu_utest_shadow", f"npu_utest_shadow_{stem}"))
            import_user_module(str(tmp_path / f"{stem}.py"))
        assert sys.modules["json"] is saved["json"] and sys.modules["copy"] is standard_copy
        assert json.loads(json.dumps({"a": [1]})) == {"a": [1]}
        private = [name for name in sys.modules if name.startswith("_op_plugin_user_file_")]
        assert len(private) >= 2 and all(sys.modules[n].__file__.startswith(str(tmp_path)) for n in private[-2:])
    finally:
        sys.modules.update(saved)
        for stem in ("json", "copy"):
            _registry.detach(f"npu::npu_utest_shadow_{stem}", _registry.Piece.REFERENCE)

    (tmp_path / "shadow.yaml").write_text(SHADOWING_YAML)
    (tmp_path / "json.py").write_text(SHADOWING_PIECES.replace("{stem}", "json"))
    result = _cli("test", "shadow.yaml", "--python", str(tmp_path / "json.py"), "--check", "opcheck",
                  "--check", "meta", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed, 0 failed" in result.stdout
