"""torch_npu's own operators on the CPU simulator (op_plugin/_simulator/npu/ops*.py).

Oracles are torch's own formulas (F.rms_norm, F.silu, rotation matrices, F.scaled_dot_product_attention),
never the kernels under test. Compiled graphs go through TorchAir's own converters and the GE executor.
"""
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from op_plugin._simulator.npu import ops as npu_ops
from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._simulator.npu.wheel_meta import META_MODULE

from op_plugin._testing_harness import assert_close, check_compiled

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
FLOATS = (F32, F16, BF16)
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")  # defines the ops first (loader.py), then imports TorchAir


def _materialize(arg):
    """A declared case's tensor spec as uniform rand in its value_range (default [-2, 2))."""
    dims = getattr(arg, "dims", None)
    if dims is None:
        return arg
    low, high = arg.value_range if getattr(arg, "value_range", None) else (-2.0, 2.0)
    return (torch.rand(dims) * (high - low) + low).to(arg.dtype)


# ---- definitions: from the wheel, before TorchAir ----

def test_schemas_and_meta_functions_come_from_the_wheel():
    wheel = simulator_dir() / "torch_npu"
    codegen = (wheel / "csrc/aten/npu_native_functions_by_codegen.yaml").read_text()
    meta = torch._C._dispatch_get_registrations_for_dispatch_key("Meta")
    for name in npu_ops.COVERED:  # "op" (its default overload) or "op.overload"
        schema = str(npu_ops.overload_of(name)._schema)
        assert schema.startswith(f"npu::{name}("), schema
        assert f"func: {name}(" in codegen
        assert f"npu::{name}" in meta
    assert "npu_grouped_matmul.List" in npu_ops.COVERED  # an overload's kernel is registered like any other
    assert npu_ops.overload_of("npu_grouped_matmul.List") is npu.npu_grouped_matmul.List


def test_a_kernel_for_an_op_the_wheel_lacks_is_refused(monkeypatch):
    """A KERNELS key names an op of the wheel's list ("op" or "op.overload"); a misspelt one would never be
    registered, so defining the ops refuses it (before defining anything)."""
    monkeypatch.setitem(npu_ops.CPU_KERNELS, "npu_grouped_matmul.list", lambda *args: None)
    with pytest.raises(ValueError, match=r"npu_grouped_matmul\.list"):
        npu_ops._define(simulator_dir() / "torch_npu")


def test_meta_functions_are_the_wheels_code():
    from op_plugin._simulator.npu import wheel_meta as npu_ops_wheel
    wheel = simulator_dir() / "torch_npu"
    metas = npu_ops_wheel.meta_functions(wheel, [n for n in npu_ops.COVERED if n not in npu_ops.META_KERNELS])
    for fn in metas.values():
        assert fn.__code__.co_filename.endswith(META_MODULE)
    for name in npu_ops.META_KERNELS:  # op_plugin's Meta only where torch_npu writes its Meta in C++
        with pytest.raises(npu_ops_wheel.WheelOpUnavailable):
            npu_ops_wheel.meta_functions(wheel, [name])
    assert "torch_npu" not in sys.modules


# Covered ops TorchAir never sees or has no converter for, with the reason (ops op_plugin lowers itself
# because TorchAir has no converter are read from its registry: `_lowered_by_op_plugin`).
NOT_LOWERED = {
    "npu_scatter_pa_kv_cache": "functionalized to npu_scatter_pa_kv_cache_functional before TorchAir lowers",
    "npu_kv_rmsnorm_rope_cache_v2": "functionalized to npu_kv_rmsnorm_rope_cache_v2_functional",
    "attention_worker_scheduler_": "functionalized to attention_worker_scheduler (TorchAir has no in-place converter)",
    "ffn_worker_scheduler_": "functionalized to ffn_worker_scheduler (TorchAir has no in-place converter)",
}


def _lowered_by_op_plugin() -> set[str]:
    """The npu ops op_plugin's registry declares its own converter for because TorchAir has none: a
    library converter, or an aten converter `when="missing"` (installed at the first npugraph compile)."""
    from op_plugin._lowering.registry import entries

    def npu_name(target):
        if isinstance(target, str):
            namespace, _, name = target.partition("::")
        elif isinstance(target, torch._ops.OpOverload):
            namespace, name, overload = str(target).split(".")
            name = name if overload == "default" else f"{name}.{overload}"
        else:  # a Python callable (size arithmetic)
            return None
        return name if namespace == npu_ops.NAMESPACE else None

    names = {npu_name(t) for entry in entries() if entry.when in ("library", "missing") for t in entry.declared}
    return names - {None}


def test_torchair_registered_its_converters_for_them():
    from torchair._ge_concrete_graph.fx2ge_converter import _get_converter
    own = _lowered_by_op_plugin()
    assert {"npu_moe_token_permute", "npu_moe_token_unpermute"} <= own
    assert not own & set(NOT_LOWERED)
    for name in npu_ops.COVERED:
        converter = _get_converter(npu_ops.overload_of(name))
        if name in own:  # op_plugin's, once installed; never TorchAir's (then op_plugin's would not be needed)
            assert converter is None or not converter.__module__.startswith("torchair."), name
        elif name not in NOT_LOWERED:
            assert converter is not None, name
    for name in NOT_LOWERED:
        assert name in npu_ops.COVERED and _get_converter(npu_ops.overload_of(name)) is None, name


def test_handle_undoes_and_redefines_in_a_fresh_process():
    code = textwrap.dedent("""
        import sys, torch
        from op_plugin._simulator.npu import ops as npu_ops
        handle = npu_ops.define_npu_ops()
        assert npu_ops.define_npu_ops() is handle          # idempotent
        assert torch.ops.npu.npu_rms_norm(torch.ones(2, 4), torch.ones(4))[0].shape == (2, 4)
        handle.destroy(); handle.destroy()
        assert not hasattr(torch.ops.npu, "npu_swiglu")
        again = npu_ops.define_npu_ops()
        assert again is not handle and hasattr(torch.ops.npu, "npu_swiglu")
        assert "torch_npu" not in sys.modules
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_nothing_is_defined_beside_a_torch_npu():
    code = textwrap.dedent("""
        import importlib.machinery, sys, types, torch
        fake = types.ModuleType("torch_npu")  # an Ascend host's torch_npu, already imported
        fake.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None)
        sys.modules["torch_npu"] = fake
        from op_plugin._simulator.npu import ops as npu_ops
        assert npu_ops.define_npu_ops() is None
        assert not hasattr(torch.ops.npu, "npu_rms_norm")
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---- eager CPU kernels against torch formulas ----

NORM_CASES = [  # x shape, gamma shape
    ((2, 3, 8), (8,)), ((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((0, 8), (8,)), ((5,), (5,)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,gshape", NORM_CASES)
def test_rms_norm(shape, gshape, dtype):
    x, gamma = torch.randn(shape).to(dtype), torch.randn(gshape).to(dtype)
    y, rstd = npu.npu_rms_norm(x, gamma, 1e-5)
    want = F.rms_norm(x.float(), gshape, gamma.float(), eps=1e-5)
    assert_close(y, want.to(dtype), "npu_ops", equal_nan=True)
    dims = tuple(range(x.dim() - len(gshape), x.dim()))
    want_rstd = torch.rsqrt(x.float().pow(2).mean(dims, keepdim=True) + 1e-5)
    assert rstd.dtype == F32
    assert_close(rstd, want_rstd, "npu_ops", dtype=F32, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,gshape", NORM_CASES)
def test_add_rms_norm(shape, gshape, dtype):
    x1, x2, gamma = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype), torch.randn(gshape).to(dtype)
    y, rstd, x = npu.npu_add_rms_norm(x1, x2, gamma)
    total = (x1.float() + x2.float()).to(dtype)
    assert torch.equal(x, total)
    assert_close(y, F.rms_norm(total.float(), gshape, gamma.float(), eps=1e-6).to(dtype), "npu_ops", equal_nan=True)
    rows = F.rms_norm(total.float(), gshape).shape[:x.dim() - len(gshape)]
    assert rstd.dtype == F32 and rstd.shape == rows + (1,) * len(gshape)


def test_rms_norm_nan_and_refusals():
    x = torch.tensor([[1.0, float("nan")], [1.0, 2.0]])
    y, _ = npu.npu_rms_norm(x, torch.ones(2))
    assert torch.isnan(y[0]).all() and torch.isfinite(y[1]).all()
    with pytest.raises(ValueError, match="npu_rms_norm"):
        npu.npu_rms_norm(torch.ones(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32))
    with pytest.raises(ValueError, match="trailing shape"):
        npu.npu_rms_norm(torch.ones(2, 3), torch.ones(2))


ROTARY_CASES = [  # x shape, r shape
    ((2, 4, 3, 8), (1, 4, 1, 8)), ((2, 3, 4, 8), (1, 1, 4, 8)), ((2, 3, 4, 6), (2, 3, 4, 6)),
    ((0, 3, 4, 8), (1, 3, 1, 8)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["half", "interleave"])
@pytest.mark.parametrize("shape,rshape", ROTARY_CASES)
def test_rotary_mul(shape, rshape, mode, dtype, rotation):
    x, r1, r2 = torch.randn(shape).to(dtype), torch.rand(rshape).to(dtype), torch.rand(rshape).to(dtype)
    got = npu.npu_rotary_mul(x, r1, r2, mode)
    want = r1.float() * x.float() + r2.float() * (x.float() @ rotation(shape[-1], mode))
    assert_close(got, want.to(dtype), "npu_ops", equal_nan=True)


def test_rotary_mul_with_rotate_matrix_and_refusals():
    x, r = torch.randn(2, 3, 4, 6), torch.rand(1, 3, 1, 6)
    rotate = torch.randn(6, 6)
    assert_close(npu.npu_rotary_mul(x, r, r, "half", rotate), r * x + r * (x @ rotate), "npu_ops", equal_nan=True)
    with pytest.raises(ValueError, match="rotary_mode"):
        npu.npu_rotary_mul(x, r, r, "third")
    with pytest.raises(ValueError, match="multiple of 4"):  # 'quarter' (CANN mode 2) needs D % 4 == 0
        npu.npu_rotary_mul(x, r, r, "quarter")
    with pytest.raises(ValueError, match="multiple of 2"):
        npu.npu_rotary_mul(torch.randn(1, 1, 1, 5), torch.ones(5), torch.ones(5))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((2, 8), -1), ((4, 6, 3), 1), ((4, 6, 3), -3), ((0, 4), -1), ((2,), 0)])
def test_swiglu(shape, dim, dtype):
    x = torch.randn(shape).to(dtype)
    a, b = x.float().split(shape[dim] // 2, dim=dim)
    assert_close(npu.npu_swiglu(x, dim), (F.silu(a) * b).to(dtype), "npu_ops", equal_nan=True)


def test_swiglu_refuses_odd_split():
    with pytest.raises(ValueError, match="even"):
        npu.npu_swiglu(torch.randn(3, 5))


GE_TYPES = {"npu_rms_norm": "RmsNorm", "npu_rotary_mul": "RotaryMul", "npu_swiglu": "SwiGlu"}


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_torchair_declared_cases(name):
    from torchair._ge_concrete_graph.fx2ge_converter import _declare_supported_converters
    from torchair._ge_concrete_graph.ge_converter import custom  # noqa: F401  (TorchAir imports it lazily)
    op = getattr(npu, name).default
    converter = _declare_supported_converters()[op]
    assert converter is not None and converter.supported_cases, name
    for case in converter.supported_cases:
        args = [_materialize(a) for a in case.args]
        kwargs = {k: _materialize(v) for k, v in case.kwargs.items()}
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        plain = [None if isinstance(a, torch.Tensor) else a for a in args]

        def fn(*ts, plain=plain, kwargs=kwargs):
            it = iter(ts)
            return op(*[next(it) if p is None else p for p in plain], **kwargs)

        check_compiled(fn, tensors, GE_TYPES[name], kind="npu_ops")


COMPILED = {  # name -> (fn, args(dtype), GE type)
    "rms_norm_2d_gamma": (lambda x, g: npu.npu_rms_norm(x, g, 1e-5),
                          lambda d: (torch.randn(2, 3, 8).to(d), torch.randn(3, 8).to(d)), "RmsNorm"),
    "add_rms_norm": (lambda a, b, g: npu.npu_add_rms_norm(a, b, g, 1e-5),
                     lambda d: (torch.randn(4, 8).to(d), torch.randn(4, 8).to(d), torch.randn(8).to(d)), "AddRmsNorm"),
    "rotary_half": (lambda x, c, s: npu.npu_rotary_mul(x, c, s),
                    lambda d: (torch.randn(2, 3, 4, 8).to(d), torch.rand(1, 3, 1, 8).to(d),
                               torch.rand(1, 3, 1, 8).to(d)), "RotaryMul"),
    "swiglu_dim0": (lambda x: npu.npu_swiglu(x, 0), lambda d: (torch.randn(6, 5).to(d),), "SwiGlu"),
    "swiglu_last": (lambda x: npu.npu_swiglu(x), lambda d: (torch.randn(2, 3, 10).to(d),), "SwiGlu"),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_matches_eager(name, dtype):
    fn, make, ge_type = COMPILED[name]
    check_compiled(fn, make(dtype), ge_type, kind="npu_ops")


def test_compiled_dynamic_shapes():
    fn = lambda x, g: npu.npu_rms_norm(x, g)[0] + npu.npu_swiglu(torch.cat([x, x], -1))  # noqa: E731
    for rows in (3, 5, 7):
        check_compiled(fn, (torch.randn(rows, 8), torch.randn(8)), "SwiGlu", kind="npu_ops", dynamic=True)
