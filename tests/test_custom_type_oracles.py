"""Issue 25, items 7 and 10 and `op-plugin test --no-grad`: oracles that are not the code under test
for custom GE types, default samples, a user's register_fake, load_yaml twice and is_loaded.

The rotation ops below are the issue's case: a rope-style kernel with the wrong sign passes every
column of npugraph == eager (on a CPU host the simulator runs the reference kernel for a custom GE
type), and only a second implementation or golden values catch it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin import _registry, testing
from op_plugin._registry.load import is_loaded, unload

OP_PLUGIN = Path(sys.executable).with_name("op-plugin")

YAML = """\
ops:
  - func: npu_h2_rot(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: NpuH2Rot}
    samples: [{x: [float32, [3, 8]]}]
  - func: npu_h2_rot_ok(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: NpuH2RotOk}
    samples: [{x: [float32, [3, 8]]}]
  - func: npu_h2_scale(Tensor x, Tensor gamma, float alpha) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    ge: {type: NpuH2Scale}
  - func: npu_h2_named(Tensor x, str mode) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: NpuH2Named}
"""

PIECES = """\
import torch
import op_plugin
from op_plugin import testing

def rotate_half(x):                       # what a rope kernel does to the halves: (-x2, x1)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)

@op_plugin.reference("npu_h2_rot")
def rot_wrong_sign(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x2, -x1], dim=-1)   # the bug: the sign on the wrong half

@op_plugin.reference("npu_h2_rot_ok")
def rot_ok(x):
    return rotate_half(x)

def rot_by_index(x):                      # the oracle: index by index, not the chunk/cat formula
    out = torch.empty_like(x)
    half = x.shape[-1] // 2
    for i in range(x.shape[-1]):
        out[..., i] = -x[..., i + half] if i < half else x[..., i - half]
    return out

testing.oracle("npu_h2_rot")(rot_by_index)
testing.oracle("npu_h2_rot_ok")(rot_by_index)

@op_plugin.reference("npu_h2_scale")
def scale(x, gamma, alpha):
    return x * gamma * alpha

@testing.golden("npu_h2_scale")
def scale_golden():                       # worked by hand: [1, 2] * [3, -1] * 0.5
    return [((torch.tensor([[1.0, 2.0]]), torch.tensor([3.0, -1.0]), 0.5), {}, torch.tensor([[1.5, -1.0]]))]

@op_plugin.reference("npu_h2_named")
def named(x, mode):
    return x
"""


def _op_plugin_test(tmp_path, *args):
    (tmp_path / "h2_ops.yaml").write_text(YAML)
    (tmp_path / "h2_pieces.py").write_text(PIECES)
    env = dict(os.environ, OP_PLUGIN_PROGRESS="0")
    return subprocess.run([str(OP_PLUGIN), "test", "h2_ops.yaml", "--python", "h2_pieces.py", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=env, check=False)


def _row(stdout: str, case: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.split()[:1] == [case])


def test_op_plugin_test_checks_custom_types_against_an_oracle_and_golden_values(tmp_path):
    """Item 7: the wrong-sign rotation passes npugraph == eager but fails the oracle; the right one
    passes both; golden values are their own row; an op without samples gets a derived one, or an
    error row saying why none can be derived (a required str)."""
    result = _op_plugin_test(tmp_path, "--check", "npugraph", "--check", "oracle", "--check", "golden")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert out.splitlines()[0].split() == ["op", "x", "sample", "npugraph", "oracle", "golden"], out
    assert _row(out, "npu_h2_rot-0") == ["npu_h2_rot-0", "ok", "FAIL"], out
    assert _row(out, "npu_h2_rot_ok-0") == ["npu_h2_rot_ok-0", "ok", "ok"], out
    assert _row(out, "npu_h2_scale-default")[:2] == ["npu_h2_scale-default", "ok"], out
    assert _row(out, "npu_h2_scale-golden0") == ["npu_h2_scale-golden0", "ok"], out
    assert _row(out, "npu_h2_named-default")[1] == "ERROR", out
    failure = next(line for line in out.splitlines() if line.startswith("FAIL npu_h2_rot-0 [oracle]"))
    assert "reference kernel departs from the oracle" in failure, failure
    named = next(line for line in out.splitlines() if line.startswith("ERROR npu_h2_named-default"))
    assert "'mode' (str)" in named and "declare `samples:`" in named, named
    # what npugraph == eager proves for a custom type without an oracle is said, not implied
    assert "note: npu_h2_scale: NpuH2Scale is a custom GE type" not in out  # it has golden values
    assert "note: npu_h2_named: NpuH2Named is a custom GE type" in out, out


def test_golden_values_catch_a_wrong_kernel_and_a_malformed_case(tmp_path):
    """Item 7: golden values fail a wrong reference kernel (eager and npugraph both checked); a
    golden entry of the wrong form is an error naming the op and the case."""
    (tmp_path / "g.yaml").write_text("""\
ops:
  - func: npu_h2_gold(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: NpuH2Gold}
""")

    @op_plugin.reference("npu_h2_gold")
    def gold(x):
        return x * 3   # golden says x * 2

    testing.golden("npu_h2_gold")(lambda: [((torch.tensor([1.0, -2.0]),), torch.tensor([2.0, -4.0]))])
    try:
        with pytest.raises(AssertionError, match=r"npu_h2_gold-golden0.*FAIL"):
            testing.check_yaml_ops(tmp_path / "g.yaml", checks=["golden"])
        from op_plugin._tools.user_tests.oracles import forget, golden_cases
        forget("npu_h2_gold")
        testing.golden("npu_h2_gold")(lambda: [torch.ones(2)])
        with pytest.raises(op_plugin.OpPluginError, match=r"npu::npu_h2_gold: golden case 0 .* must be"):
            golden_cases(_registry.find("npu_h2_gold").spec)
    finally:
        from op_plugin._tools.user_tests.oracles import forget
        forget("npu_h2_gold")
        unload("npu_h2_gold")
        _registry.detach("npu_h2_gold", _registry.Piece.REFERENCE)


def test_a_derived_sample_runs_every_check(tmp_path):
    """Item 10: an op without `samples:` is checked on a sample derived from its schema and
    `dtypes:` (here x @ weight: the kernel refuses the elementwise layouts, the Meta the 1-D one), all checks."""
    (tmp_path / "d.yaml").write_text("""\
ops:
  - func: npu_h2_linear(Tensor x, Tensor weight) -> Tensor
    outputs: [{size: "[x.shape[0], weight.shape[1]]", dtype: x}]
    dtypes: [float16, float32]
    ge:
      type: MatMulV2
      inputs: [{x1: x}, {x2: weight}]
      attrs: {transpose_x1: {value: false}, transpose_x2: {value: false}}
      outputs: [y]
""")

    @op_plugin.reference("npu_h2_linear")
    def linear(x, weight):
        return x @ weight

    try:
        outcomes = testing.check_yaml_ops(tmp_path / "d.yaml", checks=["meta", "symbolic", "npugraph", "dynamic"])
        assert {o.case for o in outcomes} == {"npu_h2_linear-default"}
        assert all(o.status == "pass" for o in outcomes), outcomes
        case = testing.yaml_cases(tmp_path / "d.yaml")[0]
        args, _ = case.inputs()
        assert [tuple(a.shape) for a in args] == [(4, 6), (6, 5)] and args[0].dtype == torch.float32
    finally:
        unload("npu_h2_linear")
        _registry.detach("npu_h2_linear", _registry.Piece.REFERENCE)


def test_no_grad_runs_an_inference_op_without_its_backward(tmp_path):
    """`op-plugin test --no-grad`: no input requires grad and the backward check is skipped, so an
    inference op whose backward is unfinished (here: wrong) checks clean."""
    (tmp_path / "n.yaml").write_text("""\
ops:
  - func: npu_h2_infer(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    samples: [{x: [float32, [2, 3]]}]
""")
    (tmp_path / "n_pieces.py").write_text("""\
import op_plugin

@op_plugin.reference("npu_h2_infer")
def infer(x):
    return x * 2

@op_plugin.backward("npu_h2_infer")
def infer_bwd(ctx, grad):
    return grad * 5        # unfinished: not what autograd gives
""")
    env = dict(os.environ, OP_PLUGIN_PROGRESS="0")
    run = lambda *extra: subprocess.run(  # noqa: E731
        [str(OP_PLUGIN), "test", "n.yaml", "--python", "n_pieces.py", "--check", "opcheck", "--check", "backward",
         *extra], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env, check=False)
    with_grad = run()
    assert with_grad.returncode == 1 and "FAIL npu_h2_infer-0 [backward]" in with_grad.stdout, with_grad.stdout
    no_grad = run("--no-grad")
    assert no_grad.returncode == 0, no_grad.stdout + no_grad.stderr
    assert _row(no_grad.stdout, "npu_h2_infer-0") == ["npu_h2_infer-0", "ok", "-"], no_grad.stdout


def test_load_yaml_twice_is_a_no_op_and_is_loaded_says_so(tmp_path):
    """Item 10: load_yaml of the same file again returns the same names without registering
    anything; a file changed since is an error that says what to do; is_loaded answers for an op
    name and for a file."""
    path = tmp_path / "twice.yaml"
    path.write_text("ops:\n  - func: npu_h2_twice(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n")
    assert not is_loaded("npu_h2_twice") and not is_loaded(path)
    try:
        assert op_plugin.load_yaml(path) == ["npu::npu_h2_twice"]
        assert op_plugin.load_yaml(str(path)) == ["npu::npu_h2_twice"]
        assert is_loaded("npu_h2_twice") and is_loaded("npu::npu_h2_twice") and is_loaded(path)
        path.write_text(path.read_text() + "    doc: changed\n")
        assert not is_loaded(path)
        with pytest.raises(op_plugin.OpPluginError, match="changed since it was loaded.*restart Python"):
            op_plugin.load_yaml(path)
    finally:
        unload("npu_h2_twice")
    assert not is_loaded("npu_h2_twice")


def test_users_register_fake_wins_with_a_warning_naming_both(tmp_path):
    """Item 10: torch.library.register_fake on a YAML op replaces the Meta generated from
    `outputs:`, as torch does on every host; npugraph then traces with the user's, and a warning
    names both once."""
    path = tmp_path / "fake.yaml"
    path.write_text("ops:\n  - func: npu_h2_fake(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n"
                    "    ge: {type: Relu, outputs: [y]}\n")

    @op_plugin.reference("npu_h2_fake")
    def fake_ref(x):
        return x.relu()

    calls = []
    try:
        op_plugin.load_yaml(path)

        @torch.library.register_fake("npu::npu_h2_fake")
        def users_fake(x):
            calls.append(x.shape)
            return torch.empty_like(x)

        torch._dynamo.reset()
        f = torch.compile(lambda x: torch.ops.npu.npu_h2_fake(x) * 2, backend="npugraph")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = f(torch.tensor([-1.0, 2.0]))
            torch._dynamo.reset()
            torch.compile(lambda x: torch.ops.npu.npu_h2_fake(x) + 1, backend="npugraph")(torch.ones(3))
        assert out.tolist() == [0.0, 4.0] and calls, calls
        said = [str(w.message) for w in caught if "register_fake" in str(w.message)]
        assert len(said) == 1, said
        assert "npu::npu_h2_fake" in said[0] and "test_custom_type_oracles.py" in said[0] and "fake.yaml:" in said[0]
        assert "outputs" in said[0], said[0]

        torch.library.register_fake("npu::npu_h2_fake")(lambda x: x.new_empty(int(x.shape[0])))  # pins the size
        (case,) = testing.yaml_cases(path)   # the file is loaded: its derived sample, <op>-default
        with pytest.raises(AssertionError,
                           match=r"the torch.library.register_fake function \(.*test_custom_type_oracles"):
            testing.CHECKS["symbolic"](case)
    finally:
        torch._dynamo.reset()
        unload("npu_h2_fake")
        _registry.detach("npu_h2_fake", _registry.Piece.REFERENCE)


ACL_MODES = """\
import sys, warnings
import torch
import op_plugin

@op_plugin.reference("npu_h2_acl")
def acl(x):
    return x * 2

op_plugin.load_yaml(sys.argv[1])
torchair = op_plugin.load_torchair()
config = torchair.CompilerConfig()
config.mode = sys.argv[2]
backend = torchair.get_npu_backend(compiler_config=config)
f = torch.compile(lambda x: torch.ops.npu.npu_h2_acl(x).relu() + 1, backend=backend)
x = torch.tensor([-1.0, 0.5, 2.0])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = f(x)
assert out.tolist() == [1.0, 2.0, 5.0], out            # relu(2x) + 1, by hand
said = [str(w.message) for w in caught if "CPU host" in str(w.message)]
assert said and sys.argv[2] in said[0] and "reference" in said[0], [str(w.message) for w in caught]
print("ACL MODE OK", sys.argv[2])
"""


@pytest.mark.parametrize("mode", ["reduce-overhead", "npugraph_ex"])
def test_torchair_acl_graph_modes_through_get_npu_backend_on_a_cpu_host(tmp_path, mode):
    """Item 6 (rest): CompilerConfig.mode "reduce-overhead" / "npugraph_ex" through
    torchair.get_npu_backend no longer fails with "Couldn't import torch_npu": the AOT graph runs
    with the reference kernels (ACL graph capture needs an NPU), with a warning saying so."""
    (tmp_path / "acl.yaml").write_text("ops:\n  - func: npu_h2_acl(Tensor x) -> Tensor\n"
                                       "    outputs: [{size: x.shape, dtype: x}]\n    ge: {type: NpuH2Acl}\n")
    (tmp_path / "acl.py").write_text(ACL_MODES)
    proc = subprocess.run([sys.executable, "acl.py", "acl.yaml", mode], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 0 and f"ACL MODE OK {mode}" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]


DUMP_ORDER = """\
import os, sys
import torch
import op_plugin

@op_plugin.reference("npu_h2_acl")
def acl(x):
    return x * 2

op_plugin.load_yaml(sys.argv[1])
torchair = op_plugin.load_torchair()
fn = lambda x: torch.ops.npu.npu_h2_acl(x) + 1

def dump_compile():
    config = torchair.CompilerConfig()
    config.dump_config.enable_dump = True
    os.makedirs("data", exist_ok=True)
    config.dump_config.dump_path = "data"
    torch._dynamo.reset()
    return torch.compile(fn, backend=torchair.get_npu_backend(compiler_config=config))(torch.ones(3))

def npugraph_compile():
    torch._dynamo.reset()
    return torch.compile(fn, backend="npugraph")(torch.ones(3))

if sys.argv[2] == "dump_first":
    assert dump_compile().tolist() == [3.0] * 3
    assert npugraph_compile().tolist() == [3.0] * 3
    files = [f for _, _, found in os.walk("data") for f in found]
    assert any(f.startswith("NpuH2Acl.") and f.endswith(".npy") for f in files), files
    print("DUMP ORDER OK")
else:
    npugraph_compile()
    try:
        dump_compile()
    except Exception as exc:
        print("REFUSED", exc)
"""


@pytest.mark.parametrize("order", ["dump_first", "npugraph_first"])
def test_a_data_dump_in_a_process_that_also_compiles_with_npugraph(tmp_path, order):
    """Item 3 (rest): GE is set up once per process with the first GE compile's options, in
    TorchAir's own code on both hosts (GeConcreteGraph.__init__ passes the dump keys to
    initialize_graph_engine). A data dump as the first compile, then npugraph, works; npugraph first
    and then a dump is refused by TorchAir's own check, naming the dump option (docs/troubleshooting.md
    gives the fix)."""
    (tmp_path / "acl.yaml").write_text("ops:\n  - func: npu_h2_acl(Tensor x) -> Tensor\n"
                                       "    outputs: [{size: x.shape, dtype: x}]\n    ge: {type: NpuH2Acl}\n")
    (tmp_path / "order.py").write_text(DUMP_ORDER)
    proc = subprocess.run([sys.executable, "order.py", "acl.yaml", order], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    if order == "dump_first":
        assert "DUMP ORDER OK" in proc.stdout, proc.stdout[-2000:]
    else:
        assert "REFUSED" in proc.stdout and "ge.exec.enableDump" in proc.stdout, proc.stdout[-2000:]


def test_the_no_grad_skip_names_the_option_as_the_caller_gives_it(tmp_path):
    """Issue 37, item 3's class: what names a fix names it in the caller's form: the backward check skipped
    for inference says `no_grad=True` to `testing.check_yaml_ops`, `--no-grad` on the command line."""
    from op_plugin._base.errors import options_given_as

    (tmp_path / "g.yaml").write_text("""\
ops:
  - func: npu_h2_form(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    dtypes: [float32]
    samples: [{x: [float32, [2, 3]]}]
""")
    (tmp_path / "g_pieces.py").write_text("import op_plugin\nop_plugin.reference('npu_h2_form')(lambda x: x * 2)\n")
    pieces = [str(tmp_path / "g_pieces.py")]
    try:
        outcomes = testing.check_yaml_ops(tmp_path / "g.yaml", python=pieces, checks=["backward"], no_grad=True)
        assert [o.detail for o in outcomes] == ["no_grad=True: inference only"], outcomes
        with options_given_as("cli"):   # as `op-plugin test` runs it (its pieces are attached already)
            outcomes = testing.check_yaml_ops(tmp_path / "g.yaml", checks=["backward"], no_grad=True)
        assert [o.detail for o in outcomes] == ["--no-grad: inference only"], outcomes
    finally:
        unload("npu_h2_form")
        _registry.detach("npu_h2_form", _registry.Piece.REFERENCE)
