"""Issue 34, the scan of TorchAir's converters: the lowerings it found wrong, corrected by op_plugin
(op_plugin/_lowering/: random_corrections.py, resize_corrections.py, fft_corrections.py,
reserved_argument_corrections.py; docs/npu-faithful-lowering.md), compiled with npugraph.

Oracles: eager CPU torch (aten's upsampling and FFTs), a float64 DFT written from its definition, and
for randint (random numbers cannot match eager bit for bit) aten's contract: dtype, shape, range, every
value drawn, and equal numbers for an equal seed. The GE types asserted show the corrected lowering ran."""
import math

import pytest
import torch
import torch.nn.functional as F

import op_plugin
from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import Npugraph, check_compiled


@pytest.fixture(scope="module", autouse=True)
def _torchair():
    return op_plugin.load_torchair()


def _compiled(fn, *args, dynamic=False):
    torch._dynamo.reset()
    with capture_graphs() as graphs:
        out = torch.compile(fn, backend="npugraph", fullgraph=True, dynamic=dynamic)(*args)
    return out, [op.type for graph in graphs for op in graph.op]


# --- aten.randint: TorchAir's Mul(float32 draw, int64 Const) --------------------------------------------

@pytest.mark.parametrize("high, dtype", [(5, torch.int64), (7, torch.int32), (2 ** 40 + 3, torch.int64),
                                         (6, torch.float32)])
def test_randint_compiles_in_range(high, dtype):
    torch.manual_seed(0)
    out, types = _compiled(lambda: torch.randint(high, (4000,), dtype=dtype))
    assert "StatelessRandomUniformV2" in types and out.dtype == dtype and out.shape == (4000,)
    assert 0 <= out.min() and out.max() < high
    if high < 10:
        assert set(out.long().tolist()) == set(range(high))  # every value drawn
    else:
        assert out.double().mean() > high / 4  # the upper part of the range is reached


def test_randint_same_seed_same_numbers_and_dynamic_sizes():
    def fn(x):
        return torch.randint(9, (x.shape[0], 3))

    torch.manual_seed(3)
    first, _ = _compiled(fn, torch.zeros(5), dynamic=True)
    torch.manual_seed(3)
    again, _ = _compiled(fn, torch.zeros(5), dynamic=True)
    assert torch.equal(first, again) and first.shape == (5, 3)
    grown, _ = _compiled(fn, torch.zeros(11), dynamic=True)
    assert grown.shape == (11, 3) and 0 <= grown.min() and grown.max() < 9


# --- aten.upsample_nearest2d with scales: TorchAir ignored them ------------------------------------------

@pytest.mark.parametrize("scale", [1.7, 2.7, (1.5, 2.7), 0.6, 2.1, 1.1, 3.3])
def test_upsample_nearest_scale_factor_matches_eager(scale):
    x = torch.randn(2, 3, 5, 7)
    run = check_compiled(lambda x: F.interpolate(x, scale_factor=scale, mode="nearest"), (x,), "GatherV2")
    assert "ResizeNearestNeighborV2" not in run.ge_types


def test_upsample_nearest_scale_factor_differs_from_the_size_rule():
    """The case TorchAir got wrong: 1.7 on 5 rows picks other rows than in/out would (the scan's finding)."""
    x = torch.arange(35.0).reshape(1, 1, 5, 7)
    by_scale = F.interpolate(x, scale_factor=1.7, mode="nearest", recompute_scale_factor=False)
    by_size = F.interpolate(x, size=by_scale.shape[-2:], mode="nearest")
    assert not torch.equal(by_scale, by_size)
    check_compiled(lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest", recompute_scale_factor=False),
                   (x,), "GatherV2")


def test_upsample_nearest_without_scales_keeps_torchairs_resize():
    check_compiled(lambda x: F.interpolate(x, size=(8, 9), mode="nearest"), (torch.randn(1, 2, 5, 7),),
                   "ResizeNearestNeighborV2")


def test_upsample_nearest_scale_factor_dynamic_sizes():
    """Symbolic sizes: the source indices built from Range/Floor/SelectV2 (no Const of them)."""
    compiled = Npugraph(lambda x: F.interpolate(x, scale_factor=(1.7, 2.7), mode="nearest"), dynamic=True)
    for shape in ((1, 2, 5, 7), (2, 3, 6, 11), (1, 1, 4, 9)):
        run = compiled.check((torch.randn(shape),), ["GatherV2", "Range", "SelectV2"])
        assert "ResizeNearestNeighborV2" not in run.ge_types


@pytest.mark.parametrize("dynamic", [False, True])
def test_upsample_nearest_scale_factor_backward_matches_eager(dynamic):
    x = torch.randn(1, 2, 5, 7)
    weight = torch.randn(1, 2, 8, 18)

    def loss(x):
        return (F.interpolate(x, scale_factor=(1.7, 2.7), mode="nearest") * weight).sum()

    got = x.clone().requires_grad_()
    torch._dynamo.reset()
    with capture_graphs() as graphs:
        torch.compile(loss, backend="npugraph", fullgraph=True, dynamic=dynamic)(got).backward()
    want = x.clone().requires_grad_()
    loss(want).backward()
    assert "InplaceIndexAdd" in [op.type for graph in graphs for op in graph.op]
    torch.testing.assert_close(got.grad, want.grad)


def test_upsample_nearest2d_vec_lowers():
    op = torch.ops.aten.upsample_nearest2d.vec
    check_compiled(lambda x: op(x, None, [1.7, 2.7]), (torch.randn(1, 2, 5, 7),), "GatherV2")


# --- aten._fft_c2c: the inverse lowered as a forward FFT ------------------------------------------------

def _dft(x: torch.Tensor, dims, inverse: bool, norm: str | None) -> torch.Tensor:
    """The DFT over `dims` in complex128 from its definition: X[k] = sum_n x[n] exp(-+2 pi i k n / N)."""
    out = x.to(torch.complex128)
    n_total = 1
    for d in dims:
        n = out.shape[d]
        n_total *= n
        k = torch.arange(n, dtype=torch.float64)
        sign = 1.0 if inverse else -1.0
        matrix = torch.exp(sign * 2j * math.pi * torch.outer(k, k) / n)
        out = torch.movedim(torch.tensordot(torch.movedim(out, d, -1), matrix, dims=([-1], [1])), -1, d)
    scale = {"backward": 1 / n_total if inverse else 1.0, "ortho": n_total ** -0.5,
             "forward": 1.0 if inverse else 1 / n_total}[norm or "backward"]
    return out * scale


_FFTS = {"fft": (torch.fft.fft, (-1,), False), "ifft": (torch.fft.ifft, (-1,), True),
         "ifft2": (torch.fft.ifft2, (-2, -1), True), "ifftn": (torch.fft.ifftn, (0, 1, 2), True),
         "fftn": (torch.fft.fftn, (0, 1, 2), False)}


def _close(got, want, dtype):
    """Within a few ulps of the parts' float dtype (FFTs round in another order than eager's)."""
    tol = 1e-5 if dtype == torch.complex64 else 1e-12
    assert got.dtype == dtype
    torch.testing.assert_close(got.to(torch.complex128), want.to(torch.complex128), rtol=tol, atol=tol)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", sorted(_FFTS))
def test_fft_c2c_matches_eager_and_the_dft(name, norm):
    fft, dims, inverse = _FFTS[name]
    x = torch.randn(2, 4, 6, dtype=torch.complex64)
    got, types = _compiled(lambda x: fft(x, norm=norm), x)
    assert ({"IFFT", "IFFT2D"} if inverse else {"FFT", "FFT2D"}) & set(types)
    if inverse:
        assert not {"FFT", "FFT2D"} & set(types)
    _close(got, fft(x, norm=norm), torch.complex64)
    _close(got, _dft(x, [d % 3 for d in dims], inverse, norm), torch.complex64)


def test_fft_c2c_complex128_and_dynamic_sizes():
    x = torch.randn(3, 8, dtype=torch.complex128)
    got, types = _compiled(lambda x: torch.fft.ifft(x, dim=0, norm="ortho"), x)
    assert "Transpose" in types and "IFFT" in types
    _close(got, _dft(x, [0], True, "ortho"), torch.complex128)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: torch.fft.ifft(x, norm="ortho"), backend="npugraph", dynamic=True)
    for shape in ((3, 8), (5, 6)):
        y = torch.randn(shape, dtype=torch.complex64)
        _close(compiled(y), _dft(y, [1], True, "ortho"), torch.complex64)


# --- reserved arguments TorchAir drops: refused by name in graph mode as in eager -------------------------

@pytest.mark.parametrize("op", ["npu_incre_flash_attention", "npu_prompt_flash_attention"])
@pytest.mark.parametrize("compiled", [False, True])
def test_flash_attention_padding_mask_refused_by_name(op, compiled):
    query = torch.randn(1, 1 if op == "npu_incre_flash_attention" else 4, 32).half()
    key = value = torch.randn(1, 4, 32).half()
    mask = torch.zeros(1, 1, 1, 4, dtype=torch.bool)
    attention = getattr(torch.ops.npu, op)

    def fn(q, k, v, m):
        return attention(q, k, v, padding_mask=m, num_heads=2, scale_value=0.25)

    torch._dynamo.reset()
    with pytest.raises(Exception, match="padding_mask") as info:
        (torch.compile(fn, backend="npugraph", fullgraph=True) if compiled else fn)(query, key, value, mask)
    assert "reserved" in str(info.value)
    without = check_compiled(lambda q, k, v: attention(q, k, v, num_heads=2, scale_value=0.25),
                             (query, key, value), kind="npu_ops")
    assert without.got.shape == query.shape


def _grouped_matmul_call(overload="default", **given):
    x, w = [torch.randn(4, 8).half()], [torch.randn(8, 16).half()]
    op = getattr(torch.ops.npu.npu_grouped_matmul, overload)
    return (lambda x, w: op(x, w, split_item=0, group_type=-1, **given)), (x, w)


def _grouped_matmul_list_call(**given):
    return _grouped_matmul_call("List", **given)


def _fia_v2_call(**given):
    q = k = v = torch.randn(1, 4, 32).bfloat16()
    return (lambda q, k, v: torch.ops.npu.npu_fused_infer_attention_score_v2(
        q, k, v, num_query_heads=1, input_layout="BSH", softmax_scale=0.125, **given)), (q, k, v)


def _kv_cache_call(**given):
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(2, 1, 3, 24, generator=g).half()
    gamma, cos, sin = torch.rand(16).half() + 0.5, torch.rand(2, 1, 3, 8).half(), torch.rand(2, 1, 3, 8).half()
    index = torch.tensor([0, 5, 7, 2, 9, 11])
    kc, ckc = torch.randn(3, 4, 1, 8).half(), torch.randn(3, 4, 1, 16).half()
    return (lambda kv, kc, ckc: torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2_functional(
        kv, gamma, cos, sin, index, kc, ckc, cache_mode="PA", **given)), (kv, kc, ckc)


# (call builder, an argument TorchAir's converter drops, a value): graph refuses by name as eager does
DROPPED = [(_grouped_matmul_call, "activation_input", [torch.randn(4, 8).half()]),
           (_grouped_matmul_list_call, "activation_quant_scale", [torch.randn(16)]),
           (_fia_v2_call, "query_rope_dtype", torch.bfloat16),
           (_fia_v2_call, "key_shared_prefix_dtype", torch.bfloat16),
           (_fia_v2_call, "dequant_scale_key_rope_dtype", torch.float8_e8m0fnu),
           (_kv_cache_call, "k_cache_dtype", 1)]


@pytest.mark.parametrize("build,name,value", DROPPED, ids=[f"{b.__name__[1:-5]}-{n}" for b, n, _ in DROPPED])
def test_arguments_torchair_drops_are_refused_by_name_in_eager_and_graph(build, name, value):
    fn, inputs = build(**{name: value})
    for compiled in (False, True):
        torch._dynamo.reset()
        with pytest.raises(Exception, match=name):
            (torch.compile(fn, backend="npugraph", fullgraph=True) if compiled else fn)(*inputs)
    plain, inputs = build()  # without it, TorchAir's lowering matches eager
    check_compiled(plain, inputs, kind="npu_ops")


def test_log_softmax_half_to_float_is_read_through_the_output_dtype():
    """The scan's `_log_softmax` finding (half_to_float never read) is not a fault: TorchAir casts `self` to
    the node's float32 output dtype first. CPU eager refuses half_to_float, so a float64 reference."""
    x = torch.randn(3, 7, dtype=torch.half)
    got = torch.compile(lambda x: torch.ops.aten._log_softmax(x, 1, True), backend="npugraph")(x)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, torch.log_softmax(x.double(), 1).float(), rtol=1e-6, atol=1e-6)
