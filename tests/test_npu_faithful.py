"""NPU-faithful lowering (docs/npu-faithful-lowering.md): dynamo's graph rewritten to what torch_npu
dispatches (SDPA per SoC branch, _weight_norm), op_plugin's converters for aten ops TorchAir does
not lower, and the numeric corrections of TorchAir's lowering (GeluV2). Oracle: eager torch."""
import pytest
import torch
import torch.nn.functional as F

import op_plugin
from op_plugin._base.errors import OpPluginError
from op_plugin._lowering import numeric_corrections, registry
from op_plugin._lowering.torchair_api import is_not_implemented_stub, torchair_converter, torchair_lowers
from op_plugin._simulator.npu import dispatch as npu_dispatch


def _compile(fn, **options):
    return torch.compile(fn, backend="npugraph", options=options or None)


def _torchair():
    return op_plugin._simulator.load_simulated_torchair()


# --- SDPA -------------------------------------------------------------------------------------

def _qkv(b=2, n=4, s=8, d=8, nk=None, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    nk = nk or n
    return (torch.randn(b, n, s, d, generator=g, dtype=dtype), torch.randn(b, nk, s, d, generator=g, dtype=dtype),
            torch.randn(b, nk, s, d, generator=g, dtype=dtype))


def _bool_mask(b=2, s=8):
    mask = torch.ones(b, 1, s, s, dtype=torch.bool)
    mask[0, :, :, -2:] = False
    return mask


SDPA_CASES = [
    ("no_mask", dict(), {}),
    ("causal", dict(), {"is_causal": True}),
    ("bool_mask", dict(), {"attn_mask": _bool_mask()}),
    ("float_mask", dict(), {"attn_mask": torch.zeros(2, 1, 8, 8).masked_fill(~_bool_mask(), float("-inf"))}),
    ("scale", dict(), {"scale": 0.3}),
    ("gqa", dict(nk=2), {"enable_gqa": True}),
    ("head_dim_6", dict(d=6), {"is_causal": True}),  # fp32 with D % 4 != 0: math on every SoC
    ("2d_mask", dict(), {"attn_mask": _bool_mask()[0, 0]}),
]


@pytest.mark.parametrize("name,shape,kwargs", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_sdpa_math_branch_matches_eager(name, shape, kwargs):
    q, k, v = _qkv(**shape)

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    torch.testing.assert_close(_compile(fn)(q, k, v), fn(q, k, v), atol=1e-5, rtol=1e-5)


def test_sdpa_trace_is_the_npu_math_form():
    """No CPU-only flash kernel reaches TorchAir: the GE graph is matmuls and a softmax."""
    q, k, v = _qkv()
    report = op_plugin.inspect(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    types = set(report.ge_op_types)
    assert "BatchMatMulV2" in types or "BatchMatMul" in types, types
    assert any("Softmax" in t for t in types), types


def test_rewrite_replaces_sdpa_and_weight_norm_nodes():
    def fn(q, k, v, w, g):
        return F.scaled_dot_product_attention(q, k, v), torch._weight_norm(w, g, 0)

    gm = torch.fx.symbolic_trace(fn)
    assert npu_dispatch.rewrite_for_npu(gm) == ["scaled_dot_product_attention", "_weight_norm"]
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert targets == {npu_dispatch.npu_scaled_dot_product_attention, npu_dispatch.npu_weight_norm}


@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend910_93"])
def test_sdpa_fused_branch_without_converter_is_an_error_naming_the_op(soc):
    q, k, v = _qkv()
    with pytest.raises(Exception, match="npu_fusion_attention_v3"):
        _compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), soc=soc)(q, k, v)


def test_sdpa_fused_branch_falls_back_to_math_where_torch_npu_does():
    """A float mask, or fp32 with D % 4 != 0, takes the math branch even on a fused SoC."""
    q, k, v = _qkv(d=6)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    torch.testing.assert_close(_compile(fn, soc="Ascend910B")(q, k, v), fn(q, k, v), atol=1e-5, rtol=1e-5)
    q, k, v = _qkv()
    mask = torch.zeros(2, 1, 8, 8)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    torch.testing.assert_close(_compile(fn, soc="Ascend910B")(q, k, v), fn(q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"attn_mask": _bool_mask()}], ids=["no_mask", "bool_mask"])
def test_sdpa_ascend950_lowers_to_npu_fusion_attention(kwargs):
    """float16 (FlashAttentionScore's prototype takes float16/bfloat16); eager in float32 as oracle."""
    q, k, v = _qkv(dtype=torch.float16)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs)  # noqa: E731
    expected = fn(q.float(), k.float(), v.float()).half()
    with op_plugin._simulator.capture_graphs() as captured:
        actual = _compile(fn, soc="Ascend950")(q, k, v)
    torch.testing.assert_close(actual, expected, atol=2e-3, rtol=2e-3)
    assert "FlashAttentionScore" in {op.type for graph in captured for op in graph.op}


def test_unknown_soc_is_refused():
    with pytest.raises(OpPluginError, match="soc must be one of"):
        op_plugin.npugraph_backend(soc="Ascend999")


MHA_CASES = [
    ("plain", {}),
    ("key_padding_mask", {"key_padding_mask": torch.tensor([[False] * 4 + [True] * 2, [False] * 6])}),
    ("causal", {"attn_mask": torch.nn.Transformer.generate_square_subsequent_mask(6), "is_causal": True}),
]


@pytest.mark.parametrize("name,kwargs", MHA_CASES, ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_sdpa_inside_is_rewritten(name, kwargs):
    """dynamo keeps F.multi_head_attention_forward as one node; the SDPA it calls is the NPU's."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 6, 32)
    fn = lambda x: mha(x, x, x, need_weights=False, **kwargs)[0]  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(_compile(fn)(x), fn(x), atol=1e-5, rtol=1e-5)


def test_transformer_encoder_fast_path_is_an_error_naming_the_op():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).eval()
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        with pytest.raises(Exception, match="_transformer_encoder_layer_fwd"):
            _compile(layer)(x)
        try:
            torch.backends.mha.set_fastpath_enabled(False)
            torch._dynamo.reset()
            torch.testing.assert_close(_compile(layer)(x), layer(x), atol=1e-5, rtol=1e-5)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)


# --- weight norm ------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, 2])
def test_weight_norm_parametrization_matches_eager(dim):
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3, padding=1), dim=dim).eval()
    x = torch.randn(2, 4, 10)
    with torch.no_grad():
        torch.testing.assert_close(_compile(conv)(x), conv(x), atol=1e-5, rtol=1e-5)


# --- one_hot ----------------------------------------------------------------------------------

def _route(logits, k):
    """Mixtral's router (experts_implementation="eager"): top-k experts, one-hot over experts."""
    top = torch.topk(logits, k, dim=-1).indices
    return F.one_hot(top, num_classes=logits.shape[-1]).permute(2, 1, 0).float() * 2


def test_one_hot_traces_as_on_npu_and_matches_eager():
    """torch's CPU decomposition adds aten._assert_async, which TorchAir cannot lower."""
    torch.manual_seed(0)
    for n in (6, 9, 12):
        logits = torch.randn(n, 4)
        torch.testing.assert_close(_compile(_route)(logits, 2), _route(logits, 2))
    report = op_plugin.inspect(_route, torch.randn(6, 4), 2)
    assert "Equal" in set(report.ge_op_types), report.ge_op_types


def test_one_hot_without_num_classes_is_an_error_as_on_npu():
    """dynamo runs such a call eagerly (its output shape depends on the data); a graph that still
    holds one is refused as torch_npu's kernel refuses it."""
    gm = torch.fx.symbolic_trace(lambda x: F.one_hot(x))
    assert npu_dispatch.rewrite_for_npu(gm) == ["one_hot"]
    with pytest.raises(OpPluginError, match="one_hot: torch_npu's kernel refuses num_classes=-1"):
        gm(torch.tensor([0, 2, 1]))


# --- op_plugin's aten converters --------------------------------------------------------------

def test_true_divide_converters_installed_only_where_torchair_has_none():
    _torchair()
    _compile(lambda x: x + 1)(torch.ones(2))  # installs the lowering
    missing = [op for entry in registry.entries("missing") for op in entry.targets]
    declaring = {entry.fn.__module__ for entry in registry.entries("missing")}
    assert torch.ops.aten.true_divide.Tensor in missing and torch.ops.aten.histc.default in missing
    for op in missing:
        assert not torchair_lowers(op) or torchair_converter(op).__module__ in declaring, \
            (op, torchair_converter(op).__module__)


def _ge_types_of_converter(op, shapes, meta_output, *args, **kwargs):
    """Run the converter installed on `op` in a fresh GE graph with float32 Data inputs of `shapes`.

    (AOT autograd decomposes these ops before TorchAir sees them when they come from Python, so
    the converter is exercised directly, the way TorchAir calls it.)"""
    _torchair()
    _compile(lambda x: x + 1)(torch.ones(2))  # installs the lowering
    from torchair.ge._ge_graph import Data, DataType, GeGraph

    graph = GeGraph()
    with graph:
        inputs = [Data(index=i, dtype=DataType.DT_FLOAT, shape=list(shape), placement="CPU", node_name=f"x{i}")
                  for i, shape in enumerate(shapes)]
        op._ge_converter(*inputs, *args, meta_outputs=meta_output, **kwargs)
    return [node.type for node in graph.op]


@pytest.mark.parametrize("other_shape", [[], [3], [4, 3]])
def test_true_divide_tensor_lowered_as_div(other_shape):
    types = _ge_types_of_converter(torch.ops.aten.true_divide.Tensor, ([4, 3], other_shape), torch.empty(4, 3))
    assert types[-1] == "RealDiv", types


def test_true_divide_scalar_lowered_as_div():
    types = _ge_types_of_converter(torch.ops.aten.true_divide.Scalar, ([4, 3],), torch.empty(4, 3), 2.0)
    assert "RealDiv" in types, types


def test_silu_backward_lowered_as_swish_grad():
    types = _ge_types_of_converter(torch.ops.aten.silu_backward.default, ([4, 3], [4, 3]), torch.empty(4, 3))
    assert types[-2:] == ["Swish", "SwishGrad"], types


def test_silu_backward_matches_eager():
    x = torch.linspace(-6, 6, 24).reshape(8, 3).requires_grad_()
    xc = x.detach().clone().requires_grad_()
    _compile(lambda x: F.silu(x))(x).sum().backward()
    F.silu(xc).sum().backward()
    torch.testing.assert_close(x.grad, xc.grad, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("p", [None, 2, 1.0])
def test_norm_scalaropt_dim_lowered_as_vector_norm(p):
    types = _ge_types_of_converter(torch.ops.aten.norm.ScalarOpt_dim, ([4, 3],), torch.empty(4, 1), p, [1], True)
    assert "LpNormV2" in types, types


@pytest.mark.parametrize("pad", [lambda n: (1, n // 2), lambda n: (0, n // 2, 1, 0), lambda n: (n // 3, 1, 0, 0, 0, 1)],
                         ids=["last_dim", "two_dims", "all_dims"])
def test_constant_pad_nd_with_symbolic_pads(pad):
    """dynamic=True: pads computed from a size reach TorchAir as one GE tensor (TorchAir raises)."""
    fn = lambda x: F.pad(x, pad(x.shape[-1]), value=0.5)  # noqa: E731
    compiled = torch.compile(fn, backend="npugraph", dynamic=True)
    for n in (6, 9):
        x = torch.randn(2, 3, n)
        torch.testing.assert_close(compiled(x), fn(x))
    assert "ReverseV2" in op_plugin.inspect(fn, torch.randn(2, 3, 6), dynamic=True).ge_op_types


def test_constant_pad_nd_static_pads_stay_torchair_s():
    x = torch.randn(2, 3, 5)
    fn = lambda x: F.pad(x, (1, 2, 0, 1))  # noqa: E731
    torch.testing.assert_close(_compile(fn)(x), fn(x))
    assert "ReverseV2" not in op_plugin.inspect(fn, x).ge_op_types


def test_not_implemented_stub_detection():
    def stub(x, meta_outputs=None):
        """doc"""
        raise NotImplementedError("no")

    def real(x, meta_outputs=None):
        if x is None:
            raise NotImplementedError("no")
        return x

    assert is_not_implemented_stub(stub) and not is_not_implemented_stub(real) and not is_not_implemented_stub(None)


def test_replaced_converter_handle_restores_torchair_s():
    torchair = _torchair()
    op = torch.ops.aten.true_divide.out
    before = op.__dict__.get("_ge_converter")
    handle = registry.swap_converter(torchair, op, lambda *a, **k: None, "test")
    assert op.__dict__.get("_ge_converter") is not before
    handle.destroy()
    assert op.__dict__.get("_ge_converter") is before


# --- numeric corrections ----------------------------------------------------------------------

def _gelu_input():
    return torch.linspace(-6, 6, 97).reshape(97, 1).expand(97, 3).contiguous()


def test_gelu_none_is_exact_by_default():
    x = _gelu_input()
    fn = lambda x: F.gelu(x)  # noqa: E731
    torch.testing.assert_close(_compile(fn)(x), fn(x), atol=1e-6, rtol=1e-6)
    assert "GeluV2" in op_plugin.inspect(fn, x).ge_op_types


def test_gelu_torchair_option_keeps_torchair_lowering():
    x = _gelu_input()
    fn = lambda x: F.gelu(x)  # noqa: E731
    out = _compile(fn, torchair_gelu=True)(x)
    torch.testing.assert_close(out, F.gelu(x, approximate="tanh"), atol=1e-6, rtol=1e-6)
    assert (out - fn(x)).abs().max() > 1e-4  # TorchAir's Gelu is the tanh form


def test_gelu_tanh_keeps_torchair_lowering():
    x = _gelu_input()
    fn = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    torch.testing.assert_close(_compile(fn)(x), fn(x), atol=1e-6, rtol=1e-6)
    assert "Gelu" in op_plugin.inspect(fn, x).ge_op_types


def test_gelu_backward_none_is_exact():
    x = _gelu_input().requires_grad_()
    xc = x.detach().clone().requires_grad_()
    _compile(lambda x: F.gelu(x))(x).sum().backward()
    F.gelu(xc).sum().backward()
    torch.testing.assert_close(x.grad, xc.grad, atol=1e-6, rtol=1e-6)


def test_gelu_torchair_option_reaches_the_backward():
    x = _gelu_input().requires_grad_()
    xc = x.detach().clone().requires_grad_()
    _compile(lambda x: F.gelu(x), torchair_gelu=True)(x).sum().backward()
    F.gelu(xc, approximate="tanh").sum().backward()
    torch.testing.assert_close(x.grad, xc.grad, atol=1e-5, rtol=1e-5)


def test_keep_torchair_lowering_context_nests():
    assert not numeric_corrections._keep_torchair.get()
    with numeric_corrections.keep_torchair_lowering():
        assert numeric_corrections._keep_torchair.get()
        with numeric_corrections.keep_torchair_lowering(False):
            assert not numeric_corrections._keep_torchair.get()
    assert not numeric_corrections._keep_torchair.get()
