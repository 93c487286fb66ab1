"""op-plugin inspect MODULE:FACTORY: FX and GE graphs as text, and the GE graph as a picture."""
import contextlib
import io
import shutil
import sys

import pytest
import torch

import op_plugin
from op_plugin._tools.inspect.graph_classes import classify
from op_plugin._tools.inspect.graph_picture import CUSTOM_FILL, IO_FILL, YAML_FILL, ge_graph_dot, render
from op_plugin.cli import main

@pytest.fixture
def dot_binary():
    # make setup installs Graphviz; a missing `dot` is a set-up defect, not a reason to skip.
    assert shutil.which("dot"), "Graphviz `dot` is not installed: run make setup (apt-get install graphviz)"


needs_dot = pytest.mark.usefixtures("dot_binary")

FACTORY = '''
import torch

npu = torch.ops.npu


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        y, _ = npu.npu_custom_rms_norm(x, self.gamma, 1e-6)                 # built-in GE type RmsNorm
        p = npu.npu_custom_scaled_softmax(y.unsqueeze(1), 0.5, [-1], False)  # custom GE type
        return p.squeeze(1) * 2.0 + x


def make():
    torch.manual_seed(0)
    return Block(), (torch.randn(2, 3, 8),)


def not_a_pair():
    return Block()
'''


@pytest.fixture
def factory_dir(tmp_path, monkeypatch):
    (tmp_path / "inspect_factory_mod.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    sys.modules.pop("inspect_factory_mod", None)


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@needs_dot
def test_inspect_prints_graphs_and_writes_pictures(factory_dir):
    code, out, err = _run(["inspect", "inspect_factory_mod:make", "--dynamic", "--out", "pics"])
    assert code == 0, err
    assert "== FX graph 0 (dynamo) ==" in out and "torch.ops.npu.npu_custom_scaled_softmax" in out
    assert "== GE graph 0 (TorchAir lowering) ==" in out
    assert "NpuCustomScaledSoftmax: NpuCustomScaledSoftmax(" in out and "RmsNorm: RmsNorm(" in out
    pics = factory_dir / "pics"
    for name in ("fx_graph_0.py", "ge_graph_0.txt", "ge_graph_0.dot", "ge_graph_0.svg", "ge_graph_0.png"):
        assert (pics / name).is_file(), name
        assert str(pics / name).endswith(name) and f"pics/{name}" in out
    assert (pics / "ge_graph_0.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (pics / "ge_graph_0.svg").read_text()
    assert "<svg" in svg and "NpuCustomScaledSoftmax" in svg and CUSTOM_FILL in svg and YAML_FILL in svg
    assert "from npu.npu_custom_rms_norm" in svg
    assert "s0" in svg or "s1" in svg or "s2" in svg or "s7" in svg  # symbolic sizes with --dynamic


def test_inspect_without_dot_still_prints_and_writes_the_dot_source(factory_dir, monkeypatch):
    monkeypatch.setenv("PATH", str(factory_dir / "no-binaries-here"))
    code, out, err = _run(["inspect", "inspect_factory_mod:make", "--out", "pics", "--format", "png"])
    assert code == 1
    assert "Graphviz's `dot` program is not installed" in err and "apt-get install graphviz" in err
    assert "== GE graph 0" in out and (factory_dir / "pics" / "ge_graph_0.dot").is_file()
    assert not (factory_dir / "pics" / "ge_graph_0.png").exists()


@pytest.mark.parametrize("target, message", [
    ("inspect_factory_mod", "expected MODULE:FACTORY"),
    ("no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
    ("inspect_factory_mod:missing", "has no attribute 'missing'"),
    ("inspect_factory_mod:not_a_pair", "must return (model, example_inputs)"),
])
def test_inspect_reports_bad_targets(factory_dir, target, message):
    code, _, err = _run(["inspect", target])
    assert code == 2 and message in err


@pytest.fixture(scope="module")
def demo_graph():
    from op_plugin._tools.demo.model import DemoBlock, example_inputs

    torch.manual_seed(0)
    torch._dynamo.reset()
    report = op_plugin.inspect(DemoBlock().eval(), *example_inputs(), dynamic=True)
    torch._dynamo.reset()
    return report.ge_graphs[0]


def _node_lines(dot, node_type):
    return [line for line in dot.body if f"<B>{node_type}</B>" in line]


def test_demo_picture_marks_custom_yaml_io_and_folds_consts(demo_graph):
    kinds = {name: info for name, info in classify(demo_graph).items()}
    by_type = {}
    for info in kinds.values():
        by_type.setdefault(info.op.type, set()).add(info.kind)
    assert by_type["NpuCustomScaledSoftmax"] == {"custom"}
    assert by_type["RmsNorm"] == {"yaml"} and by_type["AddRmsNorm"] == {"yaml"}
    assert by_type["Data"] == {"data"} and by_type["NetOutput"] == {"output"}
    assert by_type["Const"] == {"const"} and "shape" in by_type["Shape"]
    # The swiglu converter's nodes carry the op even where TorchAir named only the last one.
    assert {i.origin for i in kinds.values() if i.op.type == "Swish"} == {"npu.npu_swiglu_mlp"}
    assert "builtin" in by_type["BatchMatMul"]  # q @ k^T from aten: not from an op_plugin op

    dot = ge_graph_dot(demo_graph)
    (softmax,) = _node_lines(dot, "NpuCustomScaledSoftmax")
    assert CUSTOM_FILL in softmax and "peripheries=2" in softmax
    assert "custom GE op from npu.npu_custom_scaled_softmax" in softmax
    assert "float32[" in softmax and "causal=True" in softmax
    (rms,) = _node_lines(dot, "RmsNorm")
    assert YAML_FILL in rms and "from npu.npu_custom_rms_norm" in rms and "rstd: float32[s" in rms
    assert all(IO_FILL in line and "invhouse" in line for line in _node_lines(dot, "Data"))
    assert any("house" in line and IO_FILL in line for line in _node_lines(dot, "NetOutput"))
    assert not _node_lines(dot, "Const") and not _node_lines(dot, "Pack")   # folded into their consumers
    assert any("perm ← int64[4] [0, 2, 1, 3]" in line for line in _node_lines(dot, "Transpose"))
    assert "cluster_npu_npu_swiglu_mlp" in dot.source

    unfolded = ge_graph_dot(demo_graph, fold_consts=False, fold_shape_ops=False)
    assert _node_lines(unfolded, "Pack") and 'label="Const' in unfolded.source


@needs_dot
def test_render_writes_requested_formats(demo_graph, tmp_path):
    paths = render(ge_graph_dot(demo_graph), tmp_path, "demo", formats=["svg"])
    assert [p.name for p in paths] == ["demo.dot", "demo.svg"]
    assert "AddRmsNorm" in (tmp_path / "demo.svg").read_text()
