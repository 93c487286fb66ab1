"""Issue 34: TorchAir lowerings that break models, each compiled with npugraph against eager.

Where TorchAir's converter builds a GE graph GE refuses, or computes something else, or has no converter
at all, op_plugin installs its own (op_plugin/_lowering/: graph_corrections.py, numeric_corrections.py,
core_converters.py, complex_converters.py, vision_converters.py; docs/npu-faithful-lowering.md):
npu_rotary_mul's modes, baddbmm's scalars, npu_fusion_attention_grad's five outputs, polar/complex,
stable sort, col2im (F.fold), trunc, and torchair.scope.data_dump()'s node attr.

Oracle: the same code run eagerly (torch_npu's ops on the CPU simulator's eager kernels, aten on CPU);
the GE types asserted show the corrected lowering ran."""
import pytest
import torch
import torch.nn.functional as F

import op_plugin
from op_plugin._simulator import capture_graphs
from op_plugin._testing_harness import assert_close, check_compiled, check_dynamic_sizes

npu = torch.ops.npu
BF16 = torch.bfloat16


@pytest.fixture(scope="module", autouse=True)
def _torchair():
    return op_plugin.load_torchair()  # torch_npu's operators (torch.ops.npu) come with the simulator


def _grads(fn, inputs, compiled):
    """The gradients of fn(*inputs) (a scalar) with respect to every input, compiled with npugraph or eager;
    and the GE types of the graphs built."""
    leaves = [t.clone().requires_grad_() for t in inputs]
    with capture_graphs() as graphs:
        (torch.compile(fn, backend="npugraph", fullgraph=True) if compiled else fn)(*leaves).backward()
    return [t.grad for t in leaves], [op.type for graph in graphs for op in graph.op]


# --- 1. npu_rotary_mul's modes ----------------------------------------------------------------------

def _rope_inputs(dtype=torch.float32):
    torch.manual_seed(0)
    return torch.randn(2, 3, 4, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype), torch.rand(1, 3, 1, 16).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, BF16])
@pytest.mark.parametrize("mode", ["interleave", "quarter", "interleave-half"])
def test_rotary_mul_modes_match_eager(mode, dtype):
    """TorchAir lowered every mode to RotaryMul (the half rotation) off Ascend 950 without `rotate`."""
    run = check_compiled(lambda x, a, b: npu.npu_rotary_mul(x, a, b, mode), _rope_inputs(dtype),
                         "RotaryPositionEmbedding", kind="npu_ops")
    assert "RotaryMul" not in run.ge_types
    half = npu.npu_rotary_mul(*_rope_inputs(dtype), "half")
    assert (run.got.float() - half.float()).abs().max() > 0.1  # the mode changes the result: not half's


def test_rotary_mul_half_keeps_torchairs_rotary_mul():
    run = check_compiled(lambda x, a, b: npu.npu_rotary_mul(x, a, b), _rope_inputs(), "RotaryMul", kind="npu_ops")
    assert "RotaryPositionEmbedding" not in run.ge_types


def test_rotary_mul_mixed_dtypes_cast_cos_sin_to_x():
    """torch_npu's eager kernel casts r1/r2 to x's dtype when they differ (RotaryMulKernelNpuOpApi.cpp)."""
    x, r1, r2 = _rope_inputs()
    run = check_compiled(lambda x, a, b: npu.npu_rotary_mul(x, a, b, "interleave"), (x.to(BF16), r1, r2),
                         "RotaryPositionEmbedding", oracle=lambda x, a, b: npu.npu_rotary_mul(x, a.to(BF16), b.to(BF16),
                                                                                              "interleave"),
                         kind="npu_ops")
    assert run.got.dtype == BF16


@pytest.mark.parametrize("mode", ["interleave", "quarter", "interleave-half"])
def test_rotary_mul_modes_train_like_eager(mode):
    """The backward (npu_rotary_mul_backward) took RotaryMulGrad, the half rotation's gradient, too."""
    def loss(x, a, b):
        return (npu.npu_rotary_mul(x, a, b, mode) ** 2).sum()

    got, types = _grads(loss, _rope_inputs(), compiled=True)
    want, _ = _grads(loss, _rope_inputs(), compiled=False)
    assert "RotaryPositionEmbeddingGrad" in types and "RotaryMulGrad" not in types
    assert_close(got, want, "npu_ops", scale=2)


# --- 2. baddbmm's scalars -----------------------------------------------------------------------------

def _bmm_inputs(dtype=torch.float32, self_shape=(2, 3, 5)):
    torch.manual_seed(1)
    return torch.randn(self_shape).to(dtype), torch.randn(2, 3, 4).to(dtype), torch.randn(2, 4, 5).to(dtype)


@pytest.mark.parametrize("kwargs", [{}, {"alpha": 0.5}, {"beta": 0.25, "alpha": 2}, {"beta": 3}],
                         ids=["defaults", "alpha", "both", "beta"])
def test_baddbmm_scalars_take_the_tensor_dtype(kwargs):
    """TorchAir's Mul(float32, int64 Const) for the default alpha=1, which GE refuses."""
    check_compiled(lambda s, a, b: torch.baddbmm(s, a, b, **kwargs), _bmm_inputs(), "BatchMatMul")


def test_baddbmm_in_half_precision():
    """alpha=0.5 was a float32 Const beside float16 tensors."""
    check_compiled(lambda s, a, b: torch.baddbmm(s, a, b, alpha=0.5, beta=0.25), _bmm_inputs(torch.float16),
                   oracle_in_float32=True, kind="npu_ops")


def test_baddbmm_with_beta_zero_ignores_self():
    """aten: with beta=0, nan and inf in self are not propagated."""
    s, a, b = _bmm_inputs(self_shape=(3, 5))
    s[0, 0] = float("nan")
    run = check_compiled(lambda s, a, b: torch.baddbmm(s, a, b, beta=0, alpha=2), (s, a, b))
    assert not run.got.isnan().any()


def test_baddbmm_with_dynamic_sizes():
    check_dynamic_sizes(lambda s, a, b: torch.baddbmm(s, a, b), [_bmm_inputs(), tuple(
        torch.randn(shape) for shape in ((3, 4, 6), (3, 4, 2), (3, 2, 6)))])


def test_multihead_attention_with_a_mask_and_weights():
    """nn.MultiheadAttention with attn_mask and the default need_weights=True: baddbmm(attn_mask, q, k^T)."""
    torch.manual_seed(2)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    mask = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    with torch.no_grad():
        run = check_compiled(lambda x: mha(x, x, x, attn_mask=mask), (x,), "BatchMatMul")
    assert run.got[1] is not None and run.got[1].shape == (2, 5, 5)


# --- 5. npu_fusion_attention_grad: five outputs ---------------------------------------------------------

def _attention_inputs():
    torch.manual_seed(3)
    return tuple(torch.randn(2, 8, 32).to(BF16) for _ in range(3))


def test_fusion_attention_trains_in_ge_mode():
    """TorchAir's converter returned FlashAttentionScoreGrad's four outputs for the schema's five: GE-mode
    training through npu_fusion_attention could not compile."""
    def loss(q, k, v):
        return (npu.npu_fusion_attention(q, k, v, 2, "BSH", scale=0.25)[0].float() ** 2).sum()

    got, types = _grads(loss, _attention_inputs(), compiled=True)
    want, _ = _grads(loss, _attention_inputs(), compiled=False)
    assert {"FlashAttentionScore", "FlashAttentionScoreGrad"} <= set(types)
    assert_close(got, want, "npu_ops", scale=2)


def test_fusion_attention_grad_node_returns_the_schemas_five_outputs():
    q, k, v = _attention_inputs()
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, k, v, 2, "BSH", scale=0.25)
    dy = torch.randn_like(q)

    def grad(q, k, v, dy, smax, ssum, out):
        return npu.npu_fusion_attention_grad(q, k, v, dy, 2, "BSH", softmax_max=smax, softmax_sum=ssum,
                                             attention_in=out, scale_value=0.25)

    run = check_compiled(grad, (q, k, v, dy, smax, ssum, out), "FlashAttentionScoreGrad", kind="npu_ops")
    assert len(run.got) == 5 and run.got[3] is None and run.got[4].shape == (0,)


def test_fusion_attention_pse_reaches_the_ge_node():
    """TorchAir never fed pse to FlashAttentionScore's real_shift (a silent wrong result on an NPU); now it
    does, and the simulator, which does not implement real_shift, refuses it by name."""
    q, k, v = _attention_inputs()
    pse = torch.randn(1, 2, 8, 8).to(BF16)
    with pytest.raises(Exception, match="real_shift"):
        torch.compile(lambda q, k, v, p: npu.npu_fusion_attention(q, k, v, 2, "BSH", pse=p)[0],
                      backend="npugraph")(q, k, v, pse)


# --- 3. polar and complex -----------------------------------------------------------------------------

def _deepseek_rope(xq, xk, position_ids, inv_freq):
    """transformers' DeepseekV2RotaryEmbedding.forward and apply_rotary_emb (models/deepseek_v2)."""
    freqs = position_ids[..., None].float() * inv_freq
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs).unsqueeze(1)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq), \
        torch.view_as_real(xk_ * freqs_cis).flatten(3).type_as(xk)


def _rope_case(batch, length):
    torch.manual_seed(4)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 8, 2, dtype=torch.float) / 8))
    return (torch.randn(batch, 4, length, 8), torch.randn(batch, 1, length, 8),
            torch.arange(length).expand(batch, length), inv_freq)


def test_deepseek_v2_rotary_embedding_static():
    check_compiled(_deepseek_rope, _rope_case(2, 5), ["Complex", "Cos", "Sin"])


def test_deepseek_v2_rotary_embedding_dynamic():
    check_dynamic_sizes(_deepseek_rope, [_rope_case(2, 5), _rope_case(3, 7)])


def test_polar_and_complex_in_float64():
    def fn(a, angle):
        return torch.view_as_real(torch.polar(a, angle) + torch.complex(angle, a))

    run = check_compiled(fn, (torch.rand(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)),
                         "Complex")
    assert run.got.dtype == torch.float64


# --- 4. stable sort, col2im, trunc --------------------------------------------------------------------

def _route(expert_ids):
    """MoE routing: tokens grouped by expert, in token order within an expert (ties keep their order)."""
    order = torch.argsort(expert_ids.flatten(), stable=True)
    return order, expert_ids.flatten()[order]


def test_argsort_stable_keeps_tie_order():
    ids = torch.randint(0, 3, (6, 2), generator=torch.Generator().manual_seed(5)).to(torch.int32)
    run = check_compiled(_route, (ids,), "Sort")
    assert torch.equal(run.got[0], run.want[0])  # indices: exact, ties included


def test_sort_stable_descending_on_a_middle_dim():
    x = torch.randint(0, 4, (3, 7, 2), generator=torch.Generator().manual_seed(6)).float()
    run = check_compiled(lambda x: torch.sort(x, dim=1, descending=True, stable=True), (x,), ["Sort", "Transpose"])
    assert torch.equal(run.got[1], run.want[1])


def test_argsort_stable_with_dynamic_sizes():
    gen = torch.Generator().manual_seed(7)
    check_dynamic_sizes(_route, [(torch.randint(0, 4, (5, 2), generator=gen),),
                                 (torch.randint(0, 4, (9, 2), generator=gen),)])


def test_a_converter_that_only_raises_runtime_error_is_a_stub():
    """TorchAir's sort.stable converter only raises RuntimeError("... is not supported!"): a stub, so op_plugin's
    `when="missing"` converter is installed (and docs/aten-ops-without-converter.md lists the op)."""
    from op_plugin._lowering.torchair_api import is_not_implemented_stub, torchair_converter

    def stub(x, meta_outputs=None):
        """doc"""
        raise RuntimeError("not supported!")

    def raises_sometimes(x, meta_outputs=None):
        if x is None:
            raise RuntimeError("no")
        return x

    assert is_not_implemented_stub(stub) and not is_not_implemented_stub(raises_sometimes)
    torch.compile(lambda x: x + 1, backend="npugraph")(torch.ones(2))  # installs the lowering
    assert torchair_converter(torch.ops.aten.sort.stable).__module__ == "op_plugin._lowering.core_converters"


FOLDS = {
    "plain": (dict(output_size=(4, 5), kernel_size=2), (2, 12, 12)),
    "strided": (dict(output_size=(5, 4), kernel_size=3, padding=1, stride=2), (1, 18, 6)),
    "dilated": (dict(output_size=(4, 6), kernel_size=2, dilation=(1, 2), padding=(0, 1), stride=(2, 1)), (2, 8, 12)),
    "unbatched": (dict(output_size=(4, 6), kernel_size=2, stride=2), (8, 6)),
}


@pytest.mark.parametrize("name", sorted(FOLDS))
def test_fold_static(name):
    kwargs, shape = FOLDS[name]
    check_compiled(lambda x: F.fold(x, **kwargs), (torch.randn(shape),), "Col2im")


def test_fold_dynamic_batch():
    check_dynamic_sizes(lambda x: F.fold(x, (4, 5), 2), [(torch.randn(2, 12, 12),), (torch.randn(3, 12, 12),)])


def test_unfold_then_fold_trains_like_eager():
    """MobileViTv2 unfolds patches (im2col), transforms them and folds them back (col2im); col2im is also
    im2col's backward."""
    def loss(x):
        patches = F.unfold(x, 2, stride=2) * 3
        return (F.fold(patches, x.shape[-2:], 2, stride=2) ** 2).sum()

    x = torch.randn(2, 3, 4, 6)
    got, types = _grads(loss, (x,), compiled=True)
    want, _ = _grads(loss, (x,), compiled=False)
    assert "Col2im" in types and "Im2col" in types
    assert_close(got, want)


def test_trunc_static():
    check_compiled(lambda x: torch.trunc(x * 3) + torch.trunc(x.double()).float(), (torch.randn(3, 8),), "Trunc")


def test_trunc_of_integers_is_a_copy():
    check_compiled(lambda x: torch.trunc(x) * 2, (torch.arange(-4, 4),))


def test_trunc_of_a_float64_size_with_dynamic_sizes():
    """DPT with dynamic=True: torch_int((length - 1) ** 0.5) leaves a 0-d float64 aten.trunc in the AOT graph
    (scalar_tensor, add, convert to float64, pow 0.5, trunc), which GE's Trunc does not take."""
    def fn(x):
        side = torch.trunc(torch.scalar_tensor(x.shape[1] - 1, dtype=torch.float64) ** 0.5)
        return x * side.float()

    check_dynamic_sizes(fn, [(torch.randn(2, 17),), (torch.randn(2, 26),)])


# --- 6. torchair.scope.data_dump() --------------------------------------------------------------------

def test_data_dump_scope_compiles(_torchair):
    """torchair.scope.data_dump() tags the scope's nodes with torchair_enable_data_dump (a dump marker the
    GE interpreter used to refuse as an attr Sub's prototype does not name)."""
    def fn(a, b):
        added = a + b
        with _torchair.scope.data_dump():
            subtracted = a - b
        return added, subtracted * 2

    run = check_compiled(fn, (torch.randn(2, 2), torch.randn(2, 2)), "Sub")
    graph = run.graphs[0]
    tagged = [op.type for op in graph.op if "torchair_enable_data_dump" in op.attr]
    assert "Sub" in tagged and "Add" not in tagged


_SCOPED_DUMP = """
import os, sys
import torch, op_plugin
torchair = op_plugin.load_torchair()

def fn(a, b):
    added = a + b
    with torchair.scope.data_dump():
        subtracted = a - b
    return added, subtracted

config = torchair.CompilerConfig()
config.dump_config.enable_dump = True
os.makedirs(sys.argv[1])
config.dump_config.dump_path = sys.argv[1]
if len(sys.argv) > 2:
    config.dump_config.dump_layer = sys.argv[2]
torch.compile(fn, backend=torchair.get_npu_backend(compiler_config=config))(torch.randn(2, 2), torch.randn(2, 2))
print(sorted({name.split(".")[0] for _, _, files in os.walk(sys.argv[1]) for name in files if name.endswith(".npy")}))
"""


@pytest.mark.parametrize("layer, dumped", [(" Add ", ["Add", "Sub"]), (None, ["Sub"])],
                         ids=["with_layer", "scope_only"])
def test_a_scoped_data_dump_dumps_the_scope(tmp_path, layer, dumped):
    """Issue 34: a scoped dump writes the scope's nodes only, with dump_layer's too when it is given (TorchAir's
    docs: the union of both); hosting/data_dump.py reads the scope from the nodes' torchair_enable_data_dump."""
    import subprocess
    import sys

    script = tmp_path / "scoped_dump.py"
    script.write_text(_SCOPED_DUMP)
    args = [sys.executable, str(script), str(tmp_path / "dump")] + ([layer] if layer else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == repr(dumped)
