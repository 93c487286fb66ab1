"""op_plugin.compare: per FX node, the GE result against eager (forward and backward, static and
dynamic), a planted wrong kernel found at its node, TorchAir's gelu named with its reason."""
import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import torch

import op_plugin
from op_plugin._simulator import register_ge_kernel
from op_plugin._tools.compare.dumps import compare_dump_dirs
from op_plugin.cli import main as cli_main


class _Mlp(torch.nn.Module):
    def __init__(self, act):
        super().__init__()
        self.up, self.act = torch.nn.Linear(8, 16), act
        self.norm, self.down = torch.nn.LayerNorm(16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.down(self.norm(self.act(self.up(x))))


def _model(act=None):
    torch.manual_seed(0)
    return _Mlp(act or torch.nn.ReLU())


@pytest.mark.parametrize("dynamic", [False, True])
def test_clean_model_reports_no_divergence_forward_and_backward(dynamic):
    report = op_plugin.compare(_model(), torch.randn(3, 8), dynamic=dynamic)
    assert report.first_divergent is None, str(report)
    graphs = {row.graph.split()[0] for row in report.rows}
    assert graphs == {"forward", "backward"}
    targets = {row.target for row in report.rows}
    assert {"aten.addmm.default", "aten.relu.default", "aten.native_layer_norm.default",
            "aten.native_layer_norm_backward.default", "aten.threshold_backward.default"} <= targets
    relu = next(row for row in report.rows if row.target == "aten.relu.default")
    assert relu.ge_types == ["Relu"] and relu.ok and relu.max_abs == 0.0
    assert "no divergence" in str(report)
    assert json.loads(report.to_json())["first_divergent"] is None


def _off_by_a_bit_relu(x):
    # wrong for part of the input range only: values above 1 come out 1e-3 too large
    return [torch.where(x > 1, x + 1e-3, torch.relu(x))]


def test_planted_wrong_kernel_is_the_first_divergent_node():
    handle = register_ge_kernel("Relu", _off_by_a_bit_relu, replace=True)
    try:
        report = op_plugin.compare(_model(), torch.randn(6, 8) * 3, backward=False)
    finally:
        handle.destroy()
    assert report.first_divergent == "relu", str(report)
    row = report.first_divergent_row
    assert row.ge_types == ["Relu"] and row.graph == "forward 0"
    assert row.max_abs == pytest.approx(1e-3, rel=1e-3)
    # downstream nodes are fed the GE values: their own (local) error stays small
    after = [r for r in report.rows if r.node in ("native_layer_norm", "addmm_1") and r.output == "0"]
    assert after and all(r.ok for r in after)
    assert any(r.chained_abs and r.chained_abs > 1e-5 for r in after)  # drift from eager is shown
    data = json.loads(report.to_json())
    assert data["first_divergent"] == "relu" and data["first_divergent_graph"] == "forward 0"
    assert "first divergent FX node: relu" in str(report)


def test_torchair_gelu_is_named_with_its_reason():
    with torch.no_grad():
        report = op_plugin.compare(_model(torch.nn.GELU()), torch.randn(4, 8) * 2, torchair_gelu=True)
    assert report.first_divergent == "gelu", str(report)
    row = report.first_divergent_row
    assert row.ge_types == ["Gelu"] and "tanh approximation" in row.note
    with torch.no_grad():
        assert op_plugin.compare(_model(torch.nn.GELU()), torch.randn(4, 8) * 2).first_divergent is None


def test_custom_op_and_picture():
    def fn(x, w):
        return torch.ops.npu.npu_custom_rms_norm(x * 2, w, 1e-6)[0].sum(-1)

    report = op_plugin.compare(fn, torch.randn(4, 16), torch.randn(16), backward=False)
    assert report.first_divergent is None, str(report)
    rms = [row for row in report.rows if row.target.startswith("npu.npu_custom_rms_norm")]
    assert rms and rms[0].ge_types == ["RmsNorm"]
    dot = report.picture(0).source
    assert "#a5d6a7" in dot and rms[0].ge_node in dot


def test_shape_mismatch_is_divergent():
    def transposing(x):
        return torch.relu(x).flip(0)

    handle = register_ge_kernel("Relu", transposing, replace=True)
    try:
        report = op_plugin.compare(lambda x: torch.relu(x) + 1, torch.randn(5, 3))
    finally:
        handle.destroy()
    assert report.first_divergent == "relu"


DUMP_MODEL = Path(__file__).parent / "data" / "dump" / "dump_model.py"


def _dump(tmp_path, name, *extra):
    folder = tmp_path / name
    folder.mkdir()
    result = subprocess.run([sys.executable, str(DUMP_MODEL), str(folder), *extra], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return folder


def test_data_dump_layout_and_dump_diff(tmp_path):
    """TorchAir's dump_config reaches the simulator: per op, per step, input and output tensors in
    CANN's layout; `op-plugin compare --dumps` finds the op a planted wrong kernel changed."""
    good = _dump(tmp_path, "good")
    files = sorted(p.relative_to(good) for p in good.rglob("*.npy"))
    # {dump_path}/worldsize1_global_rank0/{time}/{device}/{model}/{model id}/{step}/
    #     {type}.{name}.{task}.{stream}.{ts}.{io}.{i}.npy
    parts = [p.parts for p in files]
    assert {len(p) for p in parts} == {7}
    assert {p[0] for p in parts} == {"worldsize1_global_rank0"} and {p[2] for p in parts} == {"0"}
    assert {p[5] for p in parts} == {"0", "1"}  # two runs, two steps
    names = {p[6].split(".")[0] + "." + p[6].split(".", 5)[5] for p in parts if p[5] == "0"}
    assert {"MatMul.input.0.npy", "MatMul.input.1.npy", "MatMul.output.0.npy", "Relu.output.0.npy"} <= names
    relu_in = next(good.rglob("Relu.*.input.0.npy"))
    matmul_out = next(p for p in relu_in.parent.glob("MatMul.*.output.0.npy"))
    assert numpy.array_equal(numpy.load(relu_in), numpy.load(matmul_out))

    bad = _dump(tmp_path, "bad", "bad")
    report = compare_dump_dirs(good, bad)
    assert report.first_divergent == "Relu", report.text()
    assert compare_dump_dirs(good, good).first_divergent is None
    assert cli_main(["compare", "--dumps", str(good), str(bad)]) == 1


CLAMP_YAML = """
ops:
  - func: npu_ctest_soft_clamp(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    samples: [{x: [float32, [4, 8]]}]
"""


def test_wrong_hand_written_converter_is_named(tmp_path):
    """A converter right for x >= 0 only (Relu(x) * 0.5 for a min(max(x, -1), 1) * 0.5): the custom op's
    FX node is the first divergent one, with the GE ops the converter built."""
    from op_plugin._registry.load import unload

    path = tmp_path / "clamp.yaml"
    path.write_text(CLAMP_YAML)
    op_plugin.load_yaml(path)
    try:
        op_plugin.reference("npu_ctest_soft_clamp")(lambda x: x.clamp(-1, 1) * 0.5)

        @op_plugin.converter("npu_ctest_soft_clamp")
        def wrong(x, meta_outputs=None):
            from torchair._ge_concrete_graph import ge_apis as ge

            return ge.Mul(ge.Minimum(ge.Relu(x), 1.0), 0.5)   # drops the negative half

        def fn(x):
            return torch.ops.npu.npu_ctest_soft_clamp(x * 3).sum(-1)

        report = op_plugin.compare(fn, torch.rand(4, 8) + 0.1, backward=False)
        assert report.first_divergent is None, str(report)   # right on this part of the range
        report = op_plugin.compare(fn, torch.randn(4, 8), backward=False)
        assert report.first_divergent == "npu_ctest_soft_clamp", str(report)
        row = report.first_divergent_row
        assert set(row.ge_types) >= {"Relu", "Minimum", "Mul"}
    finally:
        unload("npu::npu_ctest_soft_clamp")
        for piece in op_plugin._registry.Piece:
            op_plugin._registry.detach("npu::npu_ctest_soft_clamp", piece)


def test_each_op_gets_its_own_row_beside_a_pass_through_expand():
    """Issue 37, item 4: TorchAir's aten.expand converter returns its input's GE tensor when the sizes
    already match, and renames it after the expand. The op that computed the tensor keeps its row (its GE
    node and type); the expand gets a row of its own with no GE op, saying whose value it passes on."""
    def fn(x, y):
        return torch.ops.npu.npu_vector_add(x, y).expand(4, 16) + 1

    report = op_plugin.compare(fn, torch.randn(4, 16), torch.randn(4, 16), backward=False)
    assert report.first_divergent is None, str(report)
    rows = {row.node: row for row in report.rows}
    assert {"npu_vector_add", "expand", "add"} <= set(rows), str(report)
    assert rows["npu_vector_add"].ge_types == ["Add"] and rows["npu_vector_add"].target.startswith("npu.")
    expand = rows["expand"]
    assert expand.ge_types == [] and expand.ge_node == rows["npu_vector_add"].ge_node
    assert "passes on the GE value of npu_vector_add" in expand.note, expand.note
    assert [r.node for r in report.rows].index("npu_vector_add") < [r.node for r in report.rows].index("expand")


NO_BACKWARD_YAML = """\
ops:
  - func: npu_ctest_infer_scale(Tensor x, Tensor gamma) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: NpuCtestInferScale}
"""

NO_BACKWARD_MODEL = """\
import torch
import op_plugin

class Model(torch.nn.Module):      # an inference model: parameters, and an op without a backward
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(8, 8)
        self.gamma = torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        return torch.ops.npu.npu_ctest_infer_scale(self.w(x), self.gamma)

def factory():
    torch.manual_seed(0)
    return Model().eval(), (torch.randn(4, 8),)
"""


@pytest.fixture
def no_backward_model(tmp_path, monkeypatch):
    from op_plugin._registry.load import unload

    path = tmp_path / "infer_ops.yaml"
    path.write_text(NO_BACKWARD_YAML)
    (tmp_path / "ctest_infer_model.py").write_text(NO_BACKWARD_MODEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    op_plugin.load_yaml(path)
    try:
        op_plugin.reference("npu_ctest_infer_scale")(lambda x, gamma: x * gamma)
        import ctest_infer_model

        yield ctest_infer_model
    finally:
        sys.modules.pop("ctest_infer_model", None)
        unload("npu::npu_ctest_infer_scale")
        for piece in op_plugin._registry.Piece:
            op_plugin._registry.detach("npu::npu_ctest_infer_scale", piece)


def test_an_op_without_backward_is_compared_forward_with_a_note(no_backward_model, capsys):
    """Issue 37, item 3: an inference model (eval, parameters) whose op has no backward: compare compares
    the forward, skips the backward and says why, naming the fix in the caller's form (the keyword in
    Python, the flag in the CLI); no autograd traceback is printed. backward=True asks for the backward,
    so there it is an error, naming the keywords that compare the forward only."""
    model, inputs = no_backward_model.factory()
    report = op_plugin.compare(model, *inputs)
    assert report.first_divergent is None, str(report)
    assert {row.graph.split()[0] for row in report.rows} == {"forward"}
    assert any(row.target.startswith("npu.npu_ctest_infer_scale") for row in report.rows)
    (note,) = report.notes
    assert "npu::npu_ctest_infer_scale has no backward" in note and "no_grad=True" in note, note
    assert "backward not compared" in str(report) and json.loads(report.to_json())["notes"] == [note]
    err = capsys.readouterr().err
    assert "Traceback" not in err and "anomaly" not in err, err[-2000:]

    with pytest.raises(op_plugin.OpPluginError, match=r"backward=None .* or no_grad=True"):
        op_plugin.compare(model, *inputs, backward=True)

    assert cli_main(["compare", "ctest_infer_model:factory"]) == 0
    out = capsys.readouterr().out
    assert "backward not compared" in out and "--no-grad" in out and "no_grad=True" not in out, out
