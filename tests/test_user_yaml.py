"""A user's own YAML file plus decorators behaves like the shipped ops."""
import textwrap

import pytest
import torch
from torch._dynamo.testing import CompileCounter
from torch.library import opcheck

import op_plugin
from op_plugin import _registry
from op_plugin._registry.load import unload
from op_plugin.testing import sample_cases


@pytest.fixture
def user_yaml(tmp_path, request):
    """Write a YAML file; unload its ops and drop decorator pieces at the end."""
    written = []

    def write(text: str):
        path = tmp_path / f"ops_{len(written)}.yaml"
        path.write_text(textwrap.dedent(text))
        written.append(path)
        return path

    yield write
    for path in written:
        for spec in op_plugin._registry.load.parse_yaml(path):
            if _registry.find(spec.qualname) and _registry.find(spec.qualname).spec:
                unload(spec.qualname)
            for piece in _registry.Piece:
                _registry.detach(spec.qualname, piece)


LAYER_SCALE = """
    ops:
      - func: npu_user_layer_scale(Tensor x, Tensor gamma, float eps=1e-6) -> Tensor
        outputs: [{size: x.shape, dtype: x}]
        dtypes: [float16, bfloat16, float32]
        dims: {B: 4}
        samples: [{x: [float32, [B, 16]], gamma: [float32, [16]]}]
"""


def _layer_scale(x, gamma, eps=1e-6):
    return x * gamma / (gamma.abs().max() + eps)


@pytest.mark.parametrize("decorate_first", [True, False], ids=["decorators-first", "yaml-first"])
def test_user_op_works_like_shipped(user_yaml, decorate_first):
    path = user_yaml(LAYER_SCALE)
    if decorate_first:
        op_plugin.reference("npu_user_layer_scale")(_layer_scale)
    assert op_plugin.load_yaml(path) == ["npu::npu_user_layer_scale"]
    if not decorate_first:
        op_plugin.reference("npu_user_layer_scale")(_layer_scale)
    (case,) = sample_cases("npu_user_layer_scale")
    args, kwargs = case.inputs()
    torch.testing.assert_close(case.op(*args, **kwargs), _layer_scale(*args))
    assert set(opcheck(case.op, args, kwargs).values()) == {"SUCCESS"}

    cnt = CompileCounter()
    f = torch.compile(lambda x, g: torch.ops.npu.npu_user_layer_scale(x, g), backend=cnt, dynamic=True, fullgraph=True)
    for dims in case.variants():
        args, _ = case.inputs(dims)
        torch.testing.assert_close(f(*args), _layer_scale(*args))
    assert cnt.frame_count == 1


def test_missing_reference_is_a_clear_error(user_yaml):
    path = user_yaml(LAYER_SCALE)
    op_plugin.load_yaml(path)
    with pytest.raises(op_plugin.MissingImplementationError) as err:
        torch.ops.npu.npu_user_layer_scale(torch.randn(2, 16), torch.randn(16))
    message = str(err.value)
    assert message.startswith(f"{path}:3: op 'npu_user_layer_scale'")
    assert "@op_plugin.reference('npu::npu_user_layer_scale')" in message


MEAN_ROWS = """
    ops:
      - func: npu_user_mean_rows(Tensor x) -> Tensor
        samples: [{x: [float32, [5, 3]]}]
"""


def test_missing_meta_is_a_clear_error_at_trace_time(user_yaml):
    path = user_yaml(MEAN_ROWS)
    op_plugin.load_yaml(path)
    op_plugin.reference("npu_user_mean_rows")(lambda x: x.mean(0))
    assert torch.ops.npu.npu_user_mean_rows(torch.ones(5, 3)).shape == (3,)  # eager needs no Meta
    f = torch.compile(lambda x: torch.ops.npu.npu_user_mean_rows(x), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception) as err:
        f(torch.ones(5, 3))
    assert f"{path}:3: op 'npu_user_mean_rows'" in str(err.value)
    assert "Meta function (field 'outputs')" in str(err.value)

    @op_plugin.meta("npu_user_mean_rows")
    def mean_rows_meta(x):
        return x.new_empty(x.shape[1:])

    torch._dynamo.reset()
    torch.testing.assert_close(f(torch.ones(5, 3)), torch.ones(3))


def test_meta_decorator_conflicting_with_outputs_is_rejected(user_yaml):
    path = user_yaml(LAYER_SCALE)
    op_plugin.load_yaml(path)
    with pytest.raises(op_plugin.OpPluginError, match=r"ops_0.yaml:3: op 'npu_user_layer_scale': field 'outputs'"):
        op_plugin.meta("npu_user_layer_scale")(lambda x, gamma, eps=1e-6: torch.empty_like(x))


def test_meta_decorator_before_load_conflicting_with_outputs_registers_nothing(user_yaml):
    path = user_yaml(LAYER_SCALE)
    op_plugin.meta("npu_user_layer_scale")(lambda x, gamma, eps=1e-6: torch.empty_like(x))
    with pytest.raises(op_plugin.OpPluginError, match="field 'outputs'"):
        op_plugin.load_yaml(path)
    assert not hasattr(torch.ops.npu, "npu_user_layer_scale")


def test_decorating_twice_is_an_error_not_an_override(user_yaml):
    op_plugin.reference("npu_user_layer_scale")(_layer_scale)
    user_yaml(LAYER_SCALE)  # so the fixture cleans the pieces up
    with pytest.raises(op_plugin.OpPluginError, match="already has a reference"):
        op_plugin.reference("npu_user_layer_scale")(lambda x, gamma, eps=1e-6: x)


def test_backward_from_decorators(user_yaml):
    path = user_yaml(LAYER_SCALE.replace("layer_scale", "scale2").replace("float32]", "float32, float64]"))
    op_plugin.load_yaml(path)
    op_plugin.reference("npu_user_scale2")(lambda x, gamma, eps=1e-6: x * gamma)

    @op_plugin.setup_context("npu_user_scale2")
    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1])

    @op_plugin.backward("npu_user_scale2")
    def bwd(ctx, grad):
        x, gamma = ctx.saved_tensors
        return grad * gamma, (grad * x).sum(0), None

    x = torch.randn(3, 16, dtype=torch.float64, requires_grad=True)
    g = torch.randn(16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, g: torch.ops.npu.npu_user_scale2(x, g), (x, g))


def test_backward_missing_is_a_clear_error(user_yaml):
    path = user_yaml(LAYER_SCALE)
    op_plugin.load_yaml(path)
    op_plugin.reference("npu_user_layer_scale")(_layer_scale)
    y = torch.ops.npu.npu_user_layer_scale(torch.randn(2, 16, requires_grad=True), torch.randn(16))
    with pytest.raises(op_plugin.MissingImplementationError, match=r"no backward; define one with @op_plugin.backward"):
        y.sum().backward()


INPLACE = """
    ops:
      - func: npu_user_scale_(Tensor(a!) x, float alpha) -> Tensor(a!)
        samples: [{x: [float32, [4]], alpha: 2.0}]
"""


def test_inplace_user_op_functionalizes_and_refuses_backward(user_yaml):
    path = user_yaml(INPLACE)
    op_plugin.load_yaml(path)
    op_plugin.reference("npu_user_scale_")(lambda x, alpha: x.mul_(alpha))
    with pytest.raises(op_plugin.OpPluginError, match="in-place ops cannot have a backward"):
        op_plugin.backward("npu_user_scale_")(lambda ctx, g: (g, None))

    def fn(x):
        return torch.ops.npu.npu_user_scale_(x, 3.0) + 1

    x = torch.ones(4)
    out = torch.compile(fn, backend="aot_eager", fullgraph=True)(x)
    torch.testing.assert_close(x, torch.full((4,), 3.0))   # the caller's tensor was mutated
    torch.testing.assert_close(out, torch.full((4,), 4.0))
    with pytest.raises(op_plugin.OpPluginError, match="in-place op and has no gradient"):
        torch.ops.npu.npu_user_scale_(torch.ones(4, requires_grad=True), 2.0)


def test_dtype_rule_error_names_op_argument_and_accepted_dtypes(user_yaml):
    path = user_yaml(LAYER_SCALE)
    op_plugin.load_yaml(path)
    op_plugin.reference("npu_user_layer_scale")(_layer_scale)
    with pytest.raises(op_plugin.OpPluginError) as err:
        torch.ops.npu.npu_user_layer_scale(torch.ones(2, 16, dtype=torch.float64), torch.ones(16))
    assert ("npu::npu_user_layer_scale: argument 'x' has dtype float64; accepted: bfloat16, float16, float32"
            in str(err.value))
    # the same check runs in the Meta function, so a compiled call fails at trace time too
    f = torch.compile(lambda x, g: torch.ops.npu.npu_user_layer_scale(x, g), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="accepted: bfloat16, float16, float32"):
        f(torch.ones(2, 16, dtype=torch.float64), torch.ones(16))


def test_readme_example(tmp_path):
    """The README's example runs as written."""
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    yaml_text, python_text = re.findall(r"```(?:yaml|python)\n(.*?)```", readme, re.S)
    (tmp_path / "my_ops.yaml").write_text(yaml_text)
    import os
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        import contextlib
        import io
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(python_text, "README.md", "exec"), {})  # our own README, not YAML
        assert printed.getvalue().strip() == "tensor(0.)"     # what the README promises
        assert torch.ops.npu.npu_layer_scale.default
        torch._dynamo.reset()
    finally:
        os.chdir(cwd)
        unload("npu_layer_scale")
        _registry.detach("npu_layer_scale", "reference")


def test_backward_for_keyword_only_tensors_is_refused(tmp_path):
    """torch.library cannot register autograd for keyword-only Tensor arguments: a backward would
    be silently ignored, so attaching one is an error naming the op."""
    path = tmp_path / "kwonly.yaml"
    path.write_text("ops:\n  - func: npu_probe_kwonly(Tensor x, *, Tensor scale) -> Tensor\n"
                    "    outputs: [{size: x.shape, dtype: x}]\n", encoding="utf-8")
    (qualname,) = op_plugin.load_yaml(path)
    try:
        with pytest.raises(op_plugin.OpPluginError, match=r"kwonly.yaml:2: op 'npu_probe_kwonly': field 'func': "
                                                          r".*keyword-only Tensor arguments"):
            op_plugin.backward(qualname)(lambda ctx, grad: (grad, None))
    finally:
        unload(qualname)
        _registry.detach(qualname, "backward")


TWO_OPS = """
    ops:
      - func: npu_user_handle_a(Tensor x) -> Tensor
        outputs: [{size: x.shape, dtype: x}]
      - func: npu_user_handle_b(Tensor x) -> Tensor
        outputs: [{size: x.shape, dtype: x}]
"""
HANDLE_NAMES = ["npu::npu_user_handle_a", "npu::npu_user_handle_b"]


def test_load_yaml_returns_a_handle_that_reads_as_the_names(user_yaml):
    ops = op_plugin.load_yaml(user_yaml(TWO_OPS))
    assert isinstance(ops, op_plugin.LoadedOps) and "LoadedOps" in op_plugin.__all__
    assert ops == HANDLE_NAMES and HANDLE_NAMES == ops and ops == tuple(HANDLE_NAMES) and ops != HANDLE_NAMES[:1]
    assert list(ops) == HANDLE_NAMES and ops[0] == HANDLE_NAMES[0] and ops[-1] == HANDLE_NAMES[1]
    assert len(ops) == 2 and "npu::npu_user_handle_b" in ops and ops.index("npu::npu_user_handle_b") == 1
    assert ops.loaded and ops.path.name == "ops_0.yaml"
    assert repr(ops).startswith("<LoadedOps ['npu::npu_user_handle_a', 'npu::npu_user_handle_b'] from ")
    assert repr(ops).endswith("(loaded)>")
    with pytest.raises(AttributeError):
        ops.path = None


def test_unload_removes_exactly_its_ops_and_the_file_loads_again(user_yaml):
    path = user_yaml(TWO_OPS)
    other = op_plugin.load_yaml(user_yaml(LAYER_SCALE))
    ops = op_plugin.load_yaml(path)
    op_plugin.reference("npu_user_handle_a")(lambda x: x + 1)
    assert torch.ops.npu.npu_user_handle_a(torch.zeros(2)).tolist() == [1.0, 1.0]

    ops.unload()
    assert not ops.loaded and repr(ops).endswith("(unloaded)>")
    for name in HANDLE_NAMES:
        assert not op_plugin.is_loaded(name)
    assert not hasattr(torch.ops.npu, "npu_user_handle_a")
    assert other.loaded and op_plugin.is_loaded("npu_user_layer_scale")  # another file's ops stay
    ops.unload()  # a second unload does nothing

    path.write_text(path.read_text() + "\n# edited\n")  # edited or not, the file loads again
    again = op_plugin.load_yaml(path)
    assert again == HANDLE_NAMES and again.loaded
    assert torch.ops.npu.npu_user_handle_a(torch.zeros(2)).tolist() == [1.0, 1.0]  # the reference stays attached
    ops.unload()  # the old handle never touches the new load
    assert again.loaded and op_plugin.is_loaded("npu_user_handle_a")


def test_loading_the_same_file_twice_shares_one_load_that_unloads_once(user_yaml):
    path = user_yaml(TWO_OPS)
    first = op_plugin.load_yaml(path)
    second = op_plugin.load_yaml(path)
    assert first == second == HANDLE_NAMES and first is not second
    second.unload()  # whichever handle calls first unloads
    assert not first.loaded and not second.loaded and not op_plugin.is_loaded("npu_user_handle_a")
    first.unload()  # then the other one does nothing
    third = op_plugin.load_yaml(path)
    first.unload()
    second.unload()
    assert third.loaded and op_plugin.is_loaded(path)


def test_a_failing_load_registers_nothing_and_returns_no_handle(user_yaml):
    from op_plugin._registry.load import add_load_hook

    def refuse_b(state):
        if state.qualname == "npu::npu_user_handle_b":
            raise RuntimeError("hook refused b")

    path = user_yaml(TWO_OPS)
    hook = add_load_hook(refuse_b)
    try:
        with pytest.raises(RuntimeError, match="hook refused b"):
            op_plugin.load_yaml(path)
    finally:
        hook.destroy()
    assert not any(op_plugin.is_loaded(name) for name in HANDLE_NAMES)
    assert not hasattr(torch.ops.npu, "npu_user_handle_a")
    ops = op_plugin.load_yaml(path)  # nothing was left behind to collide with
    assert ops == HANDLE_NAMES
    ops.unload()
