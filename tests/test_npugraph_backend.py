"""The npugraph backend as a user meets it: by name from a fresh process, its options, its errors."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import op_plugin
from op_plugin._registry.load import unload
from op_plugin import _registry
from op_plugin._simulator import GeExecutionError

MIXED_MODEL = textwrap.dedent('''
    import sys
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Mixed(nn.Module):
        """Ordinary layers mixed with shipped ops, which are looked up only in forward."""
        def __init__(self, hidden=32):
            super().__init__()
            self.inp = nn.Linear(hidden, hidden)
            self.norm = nn.LayerNorm(hidden)
            self.gamma = nn.Parameter(torch.rand(hidden) + 0.5)
            self.w = nn.Parameter(torch.randn(hidden, hidden) / hidden ** 0.5)
            self.out = nn.Linear(hidden, hidden)

        def forward(self, x):
            npu = torch.ops.npu
            h = F.gelu(self.inp(x), approximate="tanh")      # GE's Gelu is the tanh form
            h = self.norm(h) + x                                 # residual add
            y, _ = npu.npu_custom_rms_norm(h, self.gamma, 1e-6)
            scores = torch.softmax(npu.npu_custom_linear(y, self.w) @ y.transpose(-1, -2), dim=-1)
            return self.out(npu.npu_vector_add(scores @ y, h))

    torch.manual_seed(0)
    model = Mixed().eval()
    assert "op_plugin" not in sys.modules
    compiled = torch.compile(model, backend="npugraph", fullgraph=True, dynamic=DYNAMIC)
    worst = 0.0
    for batch, seq in ((2, 6), (3, 4), (5, 7)):
        x = torch.randn(batch, seq, 32)
        with torch.no_grad():
            got = compiled(x)
            want = model(x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1.3e-6)
        worst = max(worst, (got - want).abs().max().item())
    print("op_plugin loaded by the entry point:", "op_plugin" in sys.modules)
    print("max error", worst)
''')


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fresh_process_mixed_model_by_backend_name(tmp_path, dynamic):
    script = tmp_path / "mixed.py"
    script.write_text(MIXED_MODEL.replace("DYNAMIC", str(dynamic)))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "op_plugin loaded by the entry point: True" in result.stdout


def test_without_simulator_one_clear_line(tmp_path):
    code = textwrap.dedent('''
        import torch
        f = torch.compile(lambda x: x + 1, backend="npugraph")
        try:
            f(torch.ones(2))
        except Exception as e:
            cause = getattr(e, "inner_exception", None) or e   # dynamo wraps it in BackendCompilerFailed
            print("TYPE:", type(cause).__name__)
            print("ERROR:", cause)
    ''')
    env = {**os.environ, "OP_PLUGIN_SIMULATOR_DIR": str(tmp_path / "missing")}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "TYPE: SimulatorUnavailable" in result.stdout, result.stdout + result.stderr[-2000:]
    message = result.stdout.split("ERROR: ", 1)[1].strip()
    assert "\n" not in message                                     # one line
    assert "make setup" in message and "op-plugin setup-simulator" in message
    assert str(tmp_path / "missing") in message


def test_graph_dump_option(tmp_path):
    backend = op_plugin.npugraph_backend(dump="pbtxt", dump_dir=str(tmp_path / "dumps"))
    f = torch.compile(lambda x, g: torch.ops.npu.npu_custom_rms_norm(x, g)[0], backend=backend, fullgraph=True)
    f(torch.randn(2, 8), torch.ones(8))
    dumps = list((tmp_path / "dumps").rglob("*.pbtxt"))
    assert dumps and any("RmsNorm" in p.read_text() for p in dumps)


def test_options_are_validated():
    with pytest.raises(op_plugin.OpPluginError, match="mode must be one of"):
        op_plugin.npugraph_backend(mode="fast")
    with pytest.raises(op_plugin.OpPluginError, match="dump must be one of"):
        op_plugin.npugraph_backend(dump="json")
    f = torch.compile(lambda x: x + 1, backend="npugraph", options={"colour": "red"})
    with pytest.raises(Exception, match=r"unknown option\(s\) \['colour'\]"):
        f(torch.ones(2))


def test_options_are_declared_once_by_the_config_fields():
    """NpuGraphConfig's fields are the options: the factory's signature, the option check and its
    error, compare's and inspect's keyword options all follow them."""
    import dataclasses
    import inspect

    from op_plugin._backend import NpuGraphConfig, option_specs

    names = [f.name for f in dataclasses.fields(NpuGraphConfig)]
    assert [s.name for s in option_specs()] == names
    assert all(s.help and "\n" not in s.help for s in option_specs())
    params = inspect.signature(op_plugin.npugraph_backend).parameters
    assert list(params) == names
    assert all(p.kind is p.KEYWORD_ONLY and p.default == getattr(NpuGraphConfig(), p.name) for p in params.values())
    assert op_plugin.npugraph_backend().config == NpuGraphConfig()
    assert op_plugin.npugraph_backend(soc="Ascend950", torchair_gelu=True).config == \
        NpuGraphConfig(soc="Ascend950", torchair_gelu=True)
    listed = "options are " + ", ".join(names)
    for call in (lambda: op_plugin.npugraph_backend(colour="red"),
                 lambda: op_plugin.compare(lambda x: x + 1, torch.ones(2), colour="red"),
                 lambda: op_plugin.inspect(lambda x: x + 1, torch.ones(2), colour="red")):
        with pytest.raises(op_plugin.OpPluginError, match=r"unknown option\(s\) \['colour'\]") as info:
            call()
        assert listed in str(info.value)
    with pytest.raises(op_plugin.OpPluginError, match="torchair_gelu must be True or False, got 'yes'"):
        op_plugin.npugraph_backend(torchair_gelu="yes")
    with pytest.raises(op_plugin.OpPluginError, match=r"dump must be one of \('txt', 'pbtxt', 'py'\) or None"):
        op_plugin.npugraph_backend(dump="json")


def test_aclgraph_mode_runs_the_reference_kernels():
    x, g = torch.randn(3, 8), torch.rand(8)
    f = torch.compile(lambda x, g: torch.ops.npu.npu_custom_rms_norm(x, g), backend="npugraph",
                      options={"mode": "aclgraph"}, fullgraph=True)
    with pytest.warns(UserWarning, match="aclgraph' on a CPU host runs the AOT graph with the reference kernels"):
        results = f(x, g)
    for got, want in zip(results, torch.ops.npu.npu_custom_rms_norm(x, g), strict=True):
        torch.testing.assert_close(got, want)


def test_inspect_reports_fx_and_ge_graphs():
    from op_plugin._tools.demo.model import DemoBlock, example_inputs

    report = op_plugin.inspect(DemoBlock().eval(), *example_inputs(), dynamic=True)
    assert any(n.target is torch.ops.npu.npu_custom_rms_norm for n in report.fx_graph.graph.nodes)
    types = report.ge_op_types
    assert types[0] == "Data" and types[-1] == "NetOutput"
    for expected in ("RmsNorm", "AddRmsNorm", "RotaryMul", "NpuCustomScaledSoftmax", "Swish"):
        assert expected in types
    assert "RotaryMul(" in report.ge_text()


WRONG = """
ops:
  - func: npu_user_wrong_{what}(Tensor x) -> Tensor
    outputs: [{{size: x.shape, dtype: x}}]
    ge: {{type: NpuUserWrong{type}}}
"""


@pytest.mark.parametrize("what", ["shape", "dtype"])
def test_executor_refuses_a_kernel_result_that_contradicts_the_meta(tmp_path, what):
    """A reference kernel that disagrees with the Meta function is caught by the GE executor
    (TorchAir itself checks only the number of outputs)."""
    path = tmp_path / "wrong.yaml"
    path.write_text(WRONG.format(what=what, type=what.capitalize()))
    name = f"npu_user_wrong_{what}"
    wrong = (lambda x: torch.cat([x, x])) if what == "shape" else (lambda x: x.double())
    op_plugin.reference(name)(wrong)
    op_plugin.load_yaml(path)
    try:
        f = torch.compile(lambda x: getattr(torch.ops.npu, name)(x) + 1, backend="npugraph", fullgraph=True)
        with pytest.raises(GeExecutionError) as err:
            f(torch.ones(2, 3))
        assert f"NpuUserWrong{what.capitalize()}" in str(err.value)
        assert what in str(err.value).lower()
    finally:
        unload(name)
        _registry.detach(name, "reference")


def test_op_without_ge_mapping_fails_with_what_to_add(tmp_path):
    path = tmp_path / "nomap.yaml"
    path.write_text("ops:\n  - func: npu_user_nomap(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n")
    op_plugin.reference("npu_user_nomap")(lambda x: x * 2)
    op_plugin.load_yaml(path)
    try:
        f = torch.compile(lambda x: torch.ops.npu.npu_user_nomap(x), backend="npugraph", fullgraph=True)
        with pytest.raises(Exception, match=r"nomap.yaml:2: op 'npu_user_nomap': field 'ge': .* has no GE mapping") \
                as raised:
            f(torch.ones(2))
        assert "or compile with mode='aclgraph'" in str(raised.value)
        # issue 37, item 3's class: the fix in the caller's form: the flag of `op-plugin inspect`, and none in
        # compare, which checks the GE graph (it has no mode)
        from op_plugin._base.errors import options_given_as
        from op_plugin._lowering.converters import missing_mapping_converter

        convert = missing_mapping_converter(op_plugin._registry.find("npu_user_nomap").spec)
        for form, without, said in (("cli", (), "or compile with --mode aclgraph,"), (None, ("mode",), None)):
            with options_given_as(form, without), pytest.raises(op_plugin.OpPluginError) as refused:
                convert(torch.ones(2))
            assert (said in str(refused.value)) if said else "aclgraph" not in str(refused.value), str(refused.value)
    finally:
        unload("npu_user_nomap")
        _registry.detach("npu_user_nomap", "reference")


def test_user_converter_decorator_replaces_the_generated_one(tmp_path):
    """@op_plugin.converter after the backend is in use: the next compile lowers with it."""
    path = tmp_path / "conv.yaml"
    path.write_text("ops:\n  - func: npu_user_double(Tensor x) -> Tensor\n"
                    "    outputs: [{size: x.shape, dtype: x}]\n    ge: {type: NpuUserDouble}\n")
    op_plugin.reference("npu_user_double")(lambda x: x * 2)
    op_plugin.load_yaml(path)
    try:
        x = torch.randn(3, 4)
        f = torch.compile(lambda x: torch.ops.npu.npu_user_double(x), backend="npugraph", fullgraph=True)
        with op_plugin._simulator.capture_graphs() as graphs:
            torch.testing.assert_close(f(x), x * 2)
        assert "NpuUserDouble" in op_plugin._ge.graph.op_types(graphs[-1])

        @op_plugin.converter("npu_user_double")
        def double_as_add(x, meta_outputs=None):
            from torchair._ge_concrete_graph import ge_apis as ge
            return ge.Add(x, x)

        torch._dynamo.reset()
        g = torch.compile(lambda x: torch.ops.npu.npu_user_double(x), backend="npugraph", fullgraph=True)
        with op_plugin._simulator.capture_graphs() as graphs:
            torch.testing.assert_close(g(x), x * 2)
        types = op_plugin._ge.graph.op_types(graphs[-1])
        assert "Add" in types and "NpuUserDouble" not in types
    finally:
        unload("npu_user_double")
        for piece in ("reference", "converter"):
            _registry.detach("npu_user_double", piece)


def test_scalar_type_attr_and_meta_decorator_through_npugraph(tmp_path):
    """An output dtype taken from a ScalarType argument: the YAML cannot say it, @op_plugin.meta does;
    the dtype travels to GE as a DataType attr and back to the reference kernel."""
    path = tmp_path / "cast.yaml"
    path.write_text("ops:\n  - func: npu_user_scale_cast(Tensor x, ScalarType dtype, float scale=2.0) -> Tensor\n"
                    "    ge: {type: NpuUserScaleCast}\n")
    op_plugin.reference("npu_user_scale_cast")(lambda x, dtype, scale=2.0: (x * scale).to(dtype))
    op_plugin.meta("npu_user_scale_cast")(lambda x, dtype, scale=2.0: x.new_empty(x.shape, dtype=dtype))
    op_plugin.load_yaml(path)
    try:
        x = torch.randn(4, 3)
        f = torch.compile(lambda x: torch.ops.npu.npu_user_scale_cast(x, torch.float16, 0.5),
                          backend="npugraph", fullgraph=True)
        with op_plugin._simulator.capture_graphs() as graphs:
            got = f(x)
        assert got.dtype == torch.float16
        torch.testing.assert_close(got, (x * 0.5).half())
        node = next(n for n in graphs[-1].op if n.type == "NpuUserScaleCast")
        assert node.attr["dtype"].HasField("dt")
    finally:
        unload("npu_user_scale_cast")
        for piece in ("reference", "meta"):
            _registry.detach("npu_user_scale_cast", piece)


def test_the_user_guide_lists_every_option_with_its_default():
    import re
    from pathlib import Path

    from op_plugin._backend import option_specs

    page = (Path(__file__).resolve().parents[1] / "docs" / "user-guide.md").read_text(encoding="utf-8")
    table = page[page.index("| option | default |"):].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", table, flags=re.M))
    assert rows == {s.name: repr(s.default).replace("'", '"') for s in option_specs()}
