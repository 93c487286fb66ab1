"""npu_fusion_attention_grad (FlashAttentionScoreGrad) on the CPU simulator: the gradients of an
independent softmax attention written in plain torch (torch.autograd, float64), eagerly and as a GE
node (TorchAir's converter of this wheel cannot lower it: see the last test)."""
import contextlib

import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled, run_node

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _bnsd(x, layout, heads):
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(1, 2)
    if layout == "SBH":
        x = x.transpose(0, 1)
    return x.unflatten(-1, (heads, -1)).transpose(1, 2)


def _plain_attention(q, k, v, layout, heads, kv_heads, scale, keep):
    """Softmax attention in plain torch, output in `layout`."""
    qb, kb, vb = _bnsd(q, layout, heads), _bnsd(k, layout, kv_heads), _bnsd(v, layout, kv_heads)
    kb = torch.cat([kb[:, h // (heads // kv_heads)][:, None] for h in range(heads)], dim=1)
    vb = torch.cat([vb[:, h // (heads // kv_heads)][:, None] for h in range(heads)], dim=1)
    scores = torch.einsum("bnqd,bnkd->bnqk", qb, kb) * scale
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    out = torch.einsum("bnqk,bnkd->bnqd", torch.softmax(scores, dim=-1), vb)
    if layout == "BNSD":
        return out
    if layout == "BSND":
        return out.transpose(1, 2)
    bsh = out.transpose(1, 2).flatten(2)
    return bsh if layout == "BSH" else bsh.transpose(0, 1)


def _shapes(layout, b, n, s, d):
    return {"BSH": (b, s, n * d), "SBH": (s, b, n * d), "BSND": (b, s, n, d), "BNSD": (b, n, s, d)}[layout]


CASES = [  # layout, B, N, KVN, Sq, Skv, D, mask kind
    ("BSH", 2, 4, 4, 5, 7, 8, None), ("BSH", 1, 4, 2, 6, 6, 8, "causal"), ("BNSD", 2, 2, 2, 4, 9, 16, "bool"),
    ("BNSD", 1, 4, 1, 5, 5, 8, "mode3"), ("BSND", 2, 2, 2, 3, 4, 8, None), ("SBH", 2, 2, 1, 4, 4, 8, "bool"),
]


def _case_inputs(case, dtype, seed=0):
    layout, b, n, kvn, sq, skv, d, kind = case
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(_shapes(layout, b, n, sq, d), generator=g).to(dtype)
    k = torch.randn(_shapes(layout, b, kvn, skv, d), generator=g).to(dtype)
    v = torch.randn(_shapes(layout, b, kvn, skv, d), generator=g).to(dtype)
    dy = torch.randn(q.shape, generator=g).to(dtype)
    i, j = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
    mask, extra, keep = None, {}, None
    if kind == "bool":
        mask = torch.rand(b, 1, sq, skv, generator=g) > 0.6
        mask[..., 0] = False
        extra, keep = dict(sparse_mode=1), ~mask
    elif kind == "causal":
        mask, extra, keep = j > i, {}, j <= i  # sparse_mode 0: the mask and the (unbounded) band
    elif kind == "mode3":
        mask, extra = torch.ones(2048, 2048, dtype=torch.bool).triu(1), dict(sparse_mode=3)
        keep = j - i <= skv - sq
    return q, k, v, dy, mask, extra, keep


@pytest.mark.parametrize("dtype", (F32, F16, BF16))
@pytest.mark.parametrize("fa", CASES, ids=lambda c: f"{c[0]}-{c[2]}x{c[3]}-{c[7]}")
def test_fusion_attention_grad_matches_autograd(fa, dtype):
    layout, b, n, kvn, sq, skv, d, kind = fa
    q, k, v, dy, mask, extra, keep = _case_inputs(fa, dtype)
    scale = d ** -0.5
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, k, v, n, layout, atten_mask=mask, scale=scale, **extra)
    dq, dk, dv, dpse, dsink = npu.npu_fusion_attention_grad(
        q, k, v, dy, n, layout, atten_mask=mask, softmax_max=smax, softmax_sum=ssum, attention_in=out,
        scale_value=scale, **extra)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    want = torch.autograd.grad(_plain_attention(*leaves, layout, n, kvn, scale, keep), leaves, dy.double())
    for got, expected, name in zip((dq, dk, dv), want, ("dq", "dk", "dv"), strict=True):
        assert_close(got, expected.to(dtype), "npu_ops", scale=1 if dtype == F32 else 2, what=name)
    assert dpse is None and dsink.numel() == 0  # the wheel's Meta: dpse None without pse


@pytest.mark.parametrize("fa", [c for c in CASES if c[0] in ("BSH", "BNSD")], ids=lambda c: f"{c[0]}-{c[7]}")
def test_flash_attention_score_grad_node(fa):
    """The GE kernel in a one-node graph (what TorchAir's converter would emit: BSH/BNSD, keep_prob 1)."""
    layout, b, n, kvn, sq, skv, d, kind = fa
    q, k, v, dy, mask, extra, keep = _case_inputs(fa, F16, seed=1)
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, k, v, n, layout, atten_mask=mask, scale=d ** -0.5, **extra)
    inputs = {"query": q, "key": k, "value": v, "dy": dy, "atten_mask": mask, "softmax_max": smax,
              "softmax_sum": ssum, "attention_in": out}
    outputs = [(F16, list(q.shape)), (F16, list(k.shape)), (F16, list(v.shape)), (F16, [0])]
    got = run_node("FlashAttentionScoreGrad", inputs, outputs, name="fag", head_num=n, input_layout=layout,
                   scale_value=d ** -0.5, **extra)
    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    want = torch.autograd.grad(_plain_attention(*leaves, layout, n, kvn, d ** -0.5, keep), leaves, dy.double())
    assert_close(got[:3], [w.to(F16) for w in want], "npu_ops", scale=2)
    assert got[3].numel() == 0


def test_the_grad_compiles_with_the_schemas_five_outputs():
    """torch-npu 2.13.0's schema gives npu_fusion_attention_grad five outputs (dq, dk, dv, dpse, dsink);
    TorchAir's converter returns FlashAttentionScoreGrad's four, which TorchAir rejects (an NPU host with this
    wheel fails the same way); op_plugin's correction (op_plugin/_lowering/graph_corrections.py, issue 34)
    adds dsink, so the graph matches eager (docs/torch-npu-ops.md)."""
    q, k, v, dy, _, _, _ = _case_inputs(CASES[0], F16)
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, k, v, 4, "BSH", scale=0.3)

    def fn(q, k, v, dy, smax, ssum, out):
        return npu.npu_fusion_attention_grad(q, k, v, dy, 4, "BSH", softmax_max=smax, softmax_sum=ssum,
                                             attention_in=out, scale_value=0.3)[:3]

    check_compiled(fn, (q, k, v, dy, smax, ssum, out), "FlashAttentionScoreGrad", kind="npu_ops")


def test_fusion_attention_grad_refusals():
    q = torch.randn(1, 3, 16)
    with pytest.raises(ValueError, match="softmax_max .from the forward. is required"):
        npu.npu_fusion_attention_grad(q, q, q, q, 2, "BSH")
    with pytest.raises(ValueError, match="keep_prob"):
        npu.npu_fusion_attention_grad(q, q, q, q, 2, "BSH", keep_prob=0.9)


@pytest.mark.parametrize("fa", [CASES[1], CASES[3]], ids=lambda c: f"{c[0]}-{c[7]}")
def test_fusion_attention_trains_through_its_grad_op(fa):
    """Autograd through npu_fusion_attention calls npu_fusion_attention_grad as torch_npu's formula does:
    eagerly, and compiled in aclgraph mode (the AOT graph on the reference kernels), against plain torch."""
    import op_plugin

    layout, b, n, kvn, sq, skv, d, kind = fa
    q, k, v, dy, mask, extra, keep = _case_inputs(fa, BF16, seed=2)

    def loss(q, k, v, dy, *m):
        out = npu.npu_fusion_attention(q, k, v, n, layout, atten_mask=m[0] if m else None, scale=d ** -0.5,
                                       **extra)[0]
        return (out.float() * dy.float()).sum()

    leaves = [t.double().requires_grad_() for t in (q, k, v)]
    want = torch.autograd.grad(_plain_attention(*leaves, layout, n, kvn, d ** -0.5, keep), leaves, dy.double())
    masks = () if mask is None else (mask,)
    for compiled in (False, True):
        inputs = [t.clone().requires_grad_() for t in (q, k, v)]
        fn = torch.compile(loss, backend=op_plugin.npugraph_backend(mode="aclgraph")) if compiled else loss
        with pytest.warns(UserWarning) if compiled else contextlib.nullcontext():
            fn(*inputs, dy, *masks).backward()
        assert_close([t.grad for t in inputs], [w.to(BF16) for w in want], "npu_ops", scale=2,
                     what="aclgraph" if compiled else "eager")
