"""A TorchAir user's habits on a CPU host, each in a fresh process (issue 25).

The script below is what an engineer who already uses TorchAir writes: `op_plugin.load_torchair()`
for the `torchair` module, `torchair.get_npu_backend(compiler_config=CompilerConfig())` with a
pbtxt graph dump, a data dump and `frozen_parameter`, on a model using YAML ops: one with a custom GE type
lowered from `ge:`, one whose hand-written converter emits its declared custom type with
`ge.custom_op`. It runs in both call orders (TorchAir loaded before or after the YAML) and after
an npugraph compile, and never needs an npugraph compile first.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

YAML = """\
ops:
  - func: npu_habit_scale(Tensor x, Tensor gamma, float eps=1e-6) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: NpuHabitScale}
  - func: npu_habit_twice(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: NpuHabitTwice}
"""

SCRIPT = """\
import glob, os, sys, warnings
import torch
import op_plugin

ORDER = sys.argv[1]
YAML = sys.argv[2]
DUMP = sys.argv[3]
HANDWRITTEN = sys.argv[4] == "handwritten"   # the second op: a hand-written ge.custom_op converter

@op_plugin.reference("npu_habit_scale")
def habit_scale(x, gamma, eps=1e-6):
    return x * gamma / (gamma.abs().max() + eps)

@op_plugin.reference("npu_habit_twice")
def habit_twice(x):
    return x * 2

if HANDWRITTEN:
    @op_plugin.converter("npu_habit_twice")
    def habit_twice_ge(x, meta_outputs=None):
        from torchair import ge     # TorchAir's own API: the declared custom type, by hand
        return ge.custom_op("NpuHabitTwice", inputs={"x": x}, outputs=["y"])

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = torch.nn.Parameter(torch.randn(16))
        self.w = torch.nn.Linear(16, 16)

    def forward(self, x):
        y = torch.ops.npu.npu_habit_scale(self.w(x), self.gamma)
        return torch.ops.npu.npu_habit_twice(y) + 1

if ORDER == "npugraph_first":
    op_plugin.load_yaml(YAML)
    warm = torch.compile(lambda x: torch.ops.npu.npu_habit_scale(x, x), backend="npugraph")
    warm(torch.randn(4))
    torchair = op_plugin.load_torchair()
elif ORDER == "torchair_first":
    torchair = op_plugin.load_torchair()
    op_plugin.load_yaml(YAML)
elif ORDER == "private_loader":   # the earlier private name: the full set-up, with a warning naming the public call
    op_plugin.load_yaml(YAML)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from op_plugin._simulator import load_torchair
        torchair = load_torchair()
    said = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert said and "op_plugin.load_torchair()" in said[0], [str(w.message) for w in caught]
    assert torchair is op_plugin.load_torchair()
else:
    op_plugin.load_yaml(YAML)
    torchair = op_plugin.load_torchair()

from torchair import CompilerConfig

model = Model().eval()
x = torch.randn(4, 16)
with torch.no_grad():
    expected = model(x)

config = CompilerConfig()
config.debug.graph_dump.type = "pbtxt"
config.debug.graph_dump.path = DUMP
config.experimental_config.frozen_parameter = True
if ORDER != "npugraph_first":   # GE is set up once per process: a data dump needs it set up by this config
    config.dump_config.enable_dump = True
    os.makedirs(os.path.join(DUMP, "data"))
    config.dump_config.dump_path = os.path.join(DUMP, "data")
backend = torchair.get_npu_backend(compiler_config=config)
compiled = torch.compile(model, backend=backend)
with torch.no_grad():
    got = compiled(x)
torch.testing.assert_close(got, expected)
dumps = glob.glob(os.path.join(DUMP, "*.pbtxt"))
assert dumps, f"no pbtxt dump in {DUMP}: {os.listdir(DUMP)}"
text = "".join(open(p).read() for p in dumps)
assert "NpuHabitScale" in text and "NpuHabitTwice" in text, "custom types missing from the dump"
if ORDER != "npugraph_first":
    data = [f for _, _, files in os.walk(os.path.join(DUMP, "data")) for f in files]
    assert any(f.startswith("NpuHabitScale.") and f.endswith(".npy") for f in data), data
print("HABITS OK", ORDER)
"""


def run_habits(tmp_path, order: str, handwritten: bool = True) -> subprocess.CompletedProcess:
    yaml_path = tmp_path / "habit_ops.yaml"
    yaml_path.write_text(YAML)
    script = tmp_path / "habits.py"
    script.write_text(SCRIPT)
    dump = tmp_path / "dumps"
    dump.mkdir()
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    return subprocess.run([sys.executable, str(script), order, str(yaml_path), str(dump),
                           "handwritten" if handwritten else "yaml"],
                          check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


def _check(proc, order):
    assert proc.returncode == 0 and f"HABITS OK {order}" in proc.stdout, \
        textwrap.shorten(proc.stdout, 2000) + "\n" + proc.stderr[-4000:]


@pytest.mark.parametrize("order", ["torchair_first", "yaml_first", "private_loader"])
def test_get_npu_backend_with_yaml_custom_types_no_warm_up(tmp_path, order):
    """Items 1-3: op_plugin.load_torchair() is enough, in either order, for get_npu_backend, a pbtxt
    dump and frozen_parameter on YAML ops with custom GE types (no npugraph compile first). Issue 37,
    item 6: so is the earlier private loader, op_plugin._simulator.load_torchair(), which used to leave
    the custom types without prototypes ("No AscendIR ... was found"); it says to use the public one.
    A successful data dump prints no `[ERROR]` line (item 5: TorchAir's AclmdlSetDump is answered)."""
    proc = run_habits(tmp_path, order, handwritten=False)
    _check(proc, order)
    assert "[ERROR]" not in proc.stdout + proc.stderr, proc.stderr[-4000:]


@pytest.mark.parametrize("order", ["torchair_first", "yaml_first", "npugraph_first"])
def test_torchair_habits_in_a_fresh_process(tmp_path, order):
    """Item 4 too: a hand-written converter emits the YAML-declared custom type with ge.custom_op."""
    proc = run_habits(tmp_path, order)
    assert proc.returncode == 0 and f"HABITS OK {order}" in proc.stdout, \
        textwrap.shorten(proc.stdout, 2000) + "\n" + proc.stderr[-4000:]


USER_WINS = """\
import sys, warnings
import torch
import op_plugin

ORDER, YAML = sys.argv[1], sys.argv[2]

@op_plugin.reference("npu_habit_scale")
def habit_scale(x, gamma, eps=1e-6):
    return x * gamma / (gamma.abs().max() + eps)

@op_plugin.reference("npu_habit_twice")
def habit_twice(x):
    return x * 2

op_plugin.load_yaml(YAML)
if ORDER == "private_loader":      # TorchAir loaded without op_plugin's installation, as before
    from op_plugin._simulator import load_simulated_torchair
    torchair = load_simulated_torchair()
else:
    torchair = op_plugin.load_torchair()

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")

    @torchair.register_fx_node_ge_converter(torch.ops.npu.npu_habit_twice.default)
    def users_twice(x, meta_outputs=None):
        from torchair.ge._ge_graph import get_default_ge_graph
        from torchair._ge_concrete_graph import ge_apis as ge
        return ge.Mul(x, ge.Const(3.0))     # the user's lowering: x * 3 (the reference says x * 2)

    f = torch.compile(lambda x: torch.ops.npu.npu_habit_twice(x), backend="npugraph")
    out = f(torch.ones(4))
messages = [str(w.message) for w in caught if "users_twice" in str(w.message)]
assert out.tolist() == [3.0] * 4, f"op_plugin's converter replaced the user's: {out}"
assert messages and "op_plugin" in messages[0] and "NpuHabitTwice" in messages[0], [str(w.message) for w in caught]
print("USER WINS", ORDER)
"""


@pytest.mark.parametrize("order", ["public_loader", "private_loader"])
def test_users_torchair_converter_wins_with_a_warning(tmp_path, order):
    """Item 5: a user's torchair.register_fx_node_ge_converter on a YAML op wins over op_plugin's,
    whether op_plugin installs before (as on an Ascend host) or after it (the first npugraph
    compile after a private load), with a warning naming both."""
    yaml_path = tmp_path / "habit_ops.yaml"
    yaml_path.write_text(YAML)
    script = tmp_path / "user_wins.py"
    script.write_text(USER_WINS)
    proc = subprocess.run([sys.executable, str(script), order, str(yaml_path)], check=False, capture_output=True,
                          text=True,
                          timeout=300, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 0 and f"USER WINS {order}" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-4000:]


def test_npugraph_passes_compiler_config_options_through(monkeypatch):
    """Item 6: npugraph takes TorchAir CompilerConfig options (declared as NpuGraphConfig fields, so
    the CLI flags derive from them) and hands them to TorchAir's CompilerConfig."""
    import torch

    import op_plugin
    from op_plugin._backend import option_specs

    torchair = op_plugin.load_torchair()
    seen = []
    real = torchair.get_npu_backend

    def spy(*, compiler_config=None, **kwargs):
        seen.append(compiler_config)
        return real(compiler_config=compiler_config, **kwargs)

    monkeypatch.setattr(torchair, "get_npu_backend", spy)
    assert "frozen_parameter" in [s.name for s in option_specs()]

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            return x @ self.w

    m = M().eval()
    x = torch.randn(2, 4)
    f = torch.compile(m, backend="npugraph", options={"frozen_parameter": True}, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(f(x), m(x))
    by_hand = torchair.CompilerConfig()
    by_hand.experimental_config.frozen_parameter = True   # what a TorchAir user writes
    frozen = seen[-1].experimental_config.frozen_parameter.value if seen else None
    assert frozen == by_hand.experimental_config.frozen_parameter.value
    assert frozen != torchair.CompilerConfig().experimental_config.frozen_parameter.value
    torch._dynamo.reset()


NO_GRAD = """\
import sys
import torch
import op_plugin

@op_plugin.reference("npu_habit_scale")
def habit_scale(x, gamma, eps=1e-6):
    return x * gamma / (gamma.abs().max() + eps)

@op_plugin.reference("npu_habit_twice")
def habit_twice(x):
    return x * 2

op_plugin.load_yaml(sys.argv[1])

class Model(torch.nn.Module):      # an inference model: its YAML ops have no backward
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(16, 16)
        self.gamma = torch.nn.Parameter(torch.randn(16))

    def forward(self, x):
        return torch.ops.npu.npu_habit_twice(torch.ops.npu.npu_habit_scale(self.w(x), self.gamma))

def factory():
    return Model().eval(), (torch.randn(4, 16),)

if __name__ == "__main__":
    report = op_plugin.compare(*[factory()[0]], *factory()[1], no_grad=True)
    assert report.first_divergent is None, str(report)
    print("COMPARE OK")
"""


def test_compare_on_an_inference_model_with_no_grad(tmp_path):
    """Item 8: op_plugin.compare(..., no_grad=True) and `op-plugin compare --no-grad` run the model
    under torch.no_grad(), so an inference model whose ops have no backward compares."""
    yaml_path = tmp_path / "habit_ops.yaml"
    yaml_path.write_text(YAML)
    (tmp_path / "infer_model.py").write_text(NO_GRAD.replace("sys.argv[1]", repr(str(yaml_path))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), str(tmp_path)]))
    proc = subprocess.run([sys.executable, "infer_model.py"], check=False, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "COMPARE OK" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    proc = subprocess.run([sys.executable, "-m", "op_plugin.cli", "compare", "infer_model:factory", "--no-grad"],
                          check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_validate_checks_a_builtin_mapping_against_its_prototype(tmp_path, capsys):
    """Item 9: `op-plugin validate` checks a mapping onto a CANN built-in type against CANN's
    prototype (LeakyRelu's attr is negative_slope, not slope), located, with advice that does not
    turn the built-in into a custom type."""
    from op_plugin.cli import main

    bad = tmp_path / "leaky.yaml"
    bad.write_text("""\
ops:
  - func: npu_habit_leaky(Tensor x, float slope=0.01) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: LeakyRelu, attrs: {slope: slope}}
""")
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "leaky.yaml:" in err and "LeakyRelu" in err and "negative_slope" in err, err
    assert "built-in" in err and "Ascend C" in err, err
    good = tmp_path / "leaky_ok.yaml"
    good.write_text(bad.read_text().replace("{slope: slope}", "{negative_slope: slope}"))
    assert main(["validate", str(good)]) == 0, capsys.readouterr().err


UNKNOWN_ATTR = """\
import sys
import torch
import op_plugin

@op_plugin.reference("npu_habit_twice")
def habit_twice(x):
    return x * 2

@op_plugin.converter("npu_habit_twice")
def habit_twice_ge(x, meta_outputs=None):
    from torchair import ge
    return ge.custom_op("LeakyRelu", inputs={"x": x}, outputs=["y"], attrs={ATTRS})

op_plugin.load_yaml(sys.argv[1])
f = torch.compile(lambda x: torch.ops.npu.npu_habit_twice(x), backend="npugraph")
print("OUT", f(-torch.ones(2)).tolist())
"""


@pytest.mark.parametrize("attr", ["slope", "negative_slope"])
def test_unknown_attr_of_a_builtin_type_in_custom_op_is_an_error(tmp_path, attr):
    """Item 9: ge.custom_op for a CANN built-in type with an attr its prototype does not have is an
    error naming the attr and the prototype's attrs, not silently dropped."""
    yaml_path = tmp_path / "habit_ops.yaml"
    yaml_path.write_text(YAML)
    script = tmp_path / "unknown_attr.py"
    script.write_text(UNKNOWN_ATTR.replace("{ATTRS}", f'{{"{attr}": ge.attr.Float(0.5)}}'))
    proc = subprocess.run([sys.executable, str(script), str(yaml_path)], check=False, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    if attr == "negative_slope":
        assert proc.returncode == 0 and "OUT [-0.5, -0.5]" in proc.stdout, proc.stderr[-3000:]
    else:
        assert proc.returncode != 0, proc.stdout
        assert "LeakyRelu" in proc.stderr and "'slope'" in proc.stderr and "negative_slope" in proc.stderr, \
            proc.stderr[-3000:]


def test_npugraph_ex_backend_name_on_a_cpu_host():
    """Item 6: torch.compile(backend="npugraph_ex") (torch_npu's name for TorchAir's npugraph_ex)
    works on a CPU host too: the reference kernels in the AOT graph, with the warning npugraph's
    aclgraph mode gives."""
    import warnings

    import torch

    import op_plugin  # noqa: F401

    f = torch.compile(lambda x: torch.ops.npu.npu_swiglu(x) if hasattr(torch.ops.npu, "npu_swiglu") else x * 2,
                      backend="npugraph_ex")
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = f(x)
    assert out.shape[0] == 4
    assert any("aclgraph" in str(w.message) for w in caught), [str(w.message) for w in caught]
    torch._dynamo.reset()


CACHE_COMPILE = """\
import os, sys
import torch
import op_plugin

@op_plugin.reference("npu_habit_twice")
def habit_twice(x):
    return x * 2

torchair = op_plugin.load_torchair()     # TorchAir first, the YAML after: either order works
op_plugin.load_yaml(sys.argv[1])

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = torchair.inference.cache_compile(self._forward, cache_dir=sys.argv[2])

    def forward(self, x):
        return self.cached(x)

    def _forward(self, x):
        return torch.ops.npu.npu_habit_twice(x) + 1

with torch.no_grad():
    print("CACHED", Model()(torch.ones(3)).tolist(), sorted(os.listdir(sys.argv[2])))
"""


def test_cache_compile_with_a_yaml_custom_type_and_its_reuse_from_a_second_process(tmp_path):
    """Items 1-2: TorchAir's cache_compile on a YAML op with a custom GE type, no warm-up; a second
    process runs from the cache the first wrote."""
    yaml_path = tmp_path / "habit_ops.yaml"
    yaml_path.write_text(YAML)
    script = tmp_path / "cached.py"
    script.write_text(CACHE_COMPILE)
    cache = tmp_path / "cache"
    outs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script), str(yaml_path), str(cache)], check=False,
                              capture_output=True,
                              text=True, timeout=300, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=os.getcwd()))
        assert proc.returncode == 0 and "CACHED [3.0, 3.0, 3.0]" in proc.stdout, proc.stderr[-3000:]
        outs.append(proc.stdout)
    assert "[]" not in outs[0], outs[0]   # the first process wrote the cache the second one found
