"""torch_npu's attention ops (npu/attention.py): eager == single-op graph,
bit for bit. Each eager op is an adapter over the GE kernel TorchAir's
converter lowers it to (``ge_op``), so the op called eagerly and compiled with npugraph (one node of that GE
type) must give the same bits, outputs and in-place arguments alike. Seeds: the valid calls of
``_npu_hostile_calls.VALID``.

torch_npu's attention operators on the CPU simulator: npu_fusion_attention, npu_prompt_flash_attention,
npu_incre_flash_attention, eager against F.scaled_dot_product_attention and compiled through TorchAir.

torch.library.opcheck on the attention family of issue 23: schema (declared mutations: only the in-place
npu_mla_prolog_v3 writes its caches), FakeTensor (the wheel's Meta against the CPU kernel: shapes, dtypes,
the softmax_lse and empty outputs), the autograd registration (npu_fusion_attention's formula) and AOT
dispatch."""
import math
import textwrap

import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import Const, Npugraph, assert_close, check_compiled, run_node

from .._npu_hostile_calls import VALID
from .graph_equal import assert_op_eager_equals_graph

pytestmark = pytest.mark.usefixtures("torchair")

GE_TYPES = {
    "npu_fusion_attention": "FlashAttentionScore",
    "npu_prompt_flash_attention": "PromptFlashAttention",
    "npu_incre_flash_attention": "IncreFlashAttention",
    "npu_fused_infer_attention_score": "FusedInferAttentionScore",
    "npu_fused_infer_attention_score_v2": "FusedInferAttentionScore",
    "npu_mla_prolog": "MlaProlog",
    "npu_mla_prolog_v2": "MlaPrologV2",
    "npu_mla_prolog_v3": "MlaPrologV3",
    "npu_mla_prolog_v3_functional": "MlaPrologV3",
}
# npu_fusion_attention_grad is left out: TorchAir's converter returns FlashAttentionScoreGrad's four outputs for
# the schema's five and TorchAir rejects the graph (test_attention_training.py records it).


@pytest.mark.parametrize("name", sorted(GE_TYPES))
def test_eager_equals_single_op_graph(name):
    assert_op_eager_equals_graph(name, GE_TYPES[name], VALID[name])


# ---- moved from tests/simulator/test_npu_ops_attention.py ----

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
FLOATS = (F32, F16, BF16)
npu = torch.ops.npu


# ---- npu_fusion_attention against scaled_dot_product_attention ----

def _bnsd(x, layout, heads):
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.permute(0, 2, 1, 3)
    if layout == "SBH":
        x = x.permute(1, 0, 2)
    return x.reshape(x.shape[0], x.shape[1], heads, x.shape[2] // heads).permute(0, 2, 1, 3)


def _from_bnsd(x, layout):
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.permute(0, 2, 1, 3)
    bsh = x.permute(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1)
    return bsh if layout == "BSH" else bsh.permute(1, 0, 2)


def _make(layout, b, n, nkv, sq, skv, d, dtype):
    shapes = {"BSH": lambda heads, s: (b, s, heads * d), "SBH": lambda heads, s: (s, b, heads * d),
              "BSND": lambda heads, s: (b, s, heads, d), "BNSD": lambda heads, s: (b, heads, s, d)}[layout]
    return (torch.randn(shapes(n, sq)).to(dtype), torch.randn(shapes(nkv, skv)).to(dtype),
            torch.randn(shapes(nkv, skv)).to(dtype))


def _oracle(q, k, v, layout, n, nkv, scale, keep):
    """SDPA on float32 BNSD copies; keep: bool [.., Sq, Skv] (True = attend) or None."""
    qb, kb, vb = (_bnsd(t.float(), layout, h) for t, h in ((q, n), (k, nkv), (v, nkv)))
    out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=keep, scale=scale, enable_gqa=nkv != n)
    scores = (qb @ kb.repeat_interleave(n // nkv, 1).transpose(-1, -2)) * scale
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    row_max = scores.amax(-1)
    return _from_bnsd(out, layout), row_max, torch.exp(torch.logsumexp(scores, -1) - row_max)


ATTENTION_CASES = [  # layout, B, N, Nkv, Sq, Skv, D
    ("BSH", 2, 4, 4, 5, 7, 8), ("BSH", 1, 4, 2, 3, 3, 16), ("SBH", 2, 2, 2, 4, 6, 8),
    ("BSND", 2, 4, 1, 5, 5, 8), ("BNSD", 2, 2, 2, 6, 4, 8), ("BNSD", 1, 1, 1, 1, 9, 4),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", ATTENTION_CASES, ids=lambda c: "-".join(map(str, c)))
def test_fusion_attention_layouts_and_gqa(shape, dtype):
    layout, b, n, nkv, sq, skv, d = shape
    q, k, v = _make(layout, b, n, nkv, sq, skv, d, dtype)
    scale = 1 / math.sqrt(d)
    out, smax, ssum, sout, *ints = npu.npu_fusion_attention(q, k, v, n, layout, scale=scale)
    want, row_max, row_sum = _oracle(q, k, v, layout, n, nkv, scale, None)
    assert_close(out, want.to(dtype), "npu_ops", equal_nan=True)
    assert smax.shape == (b, n, sq, 8) and smax.dtype == F32 and sout.numel() == 0 and ints == [0, 0, 0]
    assert_close(smax, row_max.unsqueeze(-1).expand_as(smax), "npu_ops", dtype=F32, equal_nan=True)
    assert_close(ssum, row_sum.unsqueeze(-1).expand_as(ssum), "npu_ops", dtype=dtype, equal_nan=True)


def _compressed():
    return torch.ones(2048, 2048, dtype=torch.bool).triu(1)


def _band(sq, skv, pre, nxt, shift):
    i, j = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
    diag = j - i - shift
    return (diag <= nxt) & (diag >= -pre)  # True = attend


MASK_CASES = {  # name -> (atten_mask(sq, skv, b, n), kwargs, keep(sq, skv))
    "bool_ss": (lambda sq, skv, b, n: torch.rand(sq, skv) > 0.7, {}, None),
    "uint8_b1ss": (lambda sq, skv, b, n: (torch.rand(b, 1, sq, skv) > 0.7).to(torch.uint8), {}, None),
    "bool_bnss": (lambda sq, skv, b, n: torch.rand(b, n, sq, skv) > 0.7, {}, None),
    "mode0_band": (lambda sq, skv, b, n: ~_band(sq, skv, 2, 1, 0), dict(pre_tockens=2, next_tockens=1),
                   lambda sq, skv: _band(sq, skv, 2, 1, 0)),
    "mode0_band_wider_mask": (lambda sq, skv, b, n: torch.zeros(sq, skv, dtype=torch.bool),
                              dict(pre_tockens=1, next_tockens=0), lambda sq, skv: _band(sq, skv, 1, 0, 0)),
    "mode1_all": (lambda sq, skv, b, n: torch.rand(sq, skv) > 0.7, dict(sparse_mode=1, pre_tockens=0, next_tockens=0),
                  None),
    "mode2_left_up": (lambda sq, skv, b, n: _compressed(), dict(sparse_mode=2),
                      lambda sq, skv: _band(sq, skv, 10**6, 0, 0)),
    "mode3_right_down": (lambda sq, skv, b, n: _compressed(), dict(sparse_mode=3),
                         lambda sq, skv: _band(sq, skv, 10**6, 0, skv - sq)),
    "mode4_band": (lambda sq, skv, b, n: _compressed(), dict(sparse_mode=4, pre_tockens=2, next_tockens=1),
                   lambda sq, skv: _band(sq, skv, 2, 1, skv - sq)),
}


@pytest.mark.parametrize("name", sorted(MASK_CASES))
def test_fusion_attention_masks(name):
    make_mask, kwargs, keep_fn = MASK_CASES[name]
    b, n, sq, skv, d = 2, 2, 5, 7, 8
    q, k, v = _make("BNSD", b, n, n, sq, skv, d, F32)
    mask = make_mask(sq, skv, b, n)
    if keep_fn is None:
        mask[..., 0] = False  # no row masked entirely
    keep = keep_fn(sq, skv) if keep_fn else mask == 0
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, k, v, n, "BNSD", atten_mask=mask, scale=0.3, **kwargs)
    want, row_max, _ = _oracle(q, k, v, "BNSD", n, n, 0.3, keep)
    assert_close(out, want, "npu_ops", equal_nan=True)
    assert_close(smax[..., 0], row_max.expand_as(smax[..., 0]), "npu_ops", dtype=F32, equal_nan=True)


def test_fusion_attention_without_mask_ignores_sparse_mode():
    q, k, v = _make("BSH", 1, 2, 2, 3, 4, 8, F32)
    out = npu.npu_fusion_attention(q, k, v, 2, "BSH", sparse_mode=3, next_tockens=0)[0]
    assert_close(out, _oracle(q, k, v, "BSH", 2, 2, 1.0, None)[0], "npu_ops", equal_nan=True)


REFUSED = {
    "dropout": (dict(keep_prob=0.9), ValueError, "keep_prob"),
    "pse": (dict(pse=torch.zeros(1, 2, 3, 4)), ValueError, "pse"),
    "varlen": (dict(actual_seq_qlen=[3], actual_seq_kvlen=[4]), ValueError, "actual_seq_qlen"),
    "layout": (dict(input_layout="TND"), ValueError, "TND"),
    "sparse5": (dict(sparse_mode=5, atten_mask=_compressed()), ValueError, "sparse_mode 5"),
    "bad_compressed": (dict(sparse_mode=3, atten_mask=torch.zeros(3, 4, dtype=torch.bool)), ValueError, "compressed"),
    "full_row": (dict(atten_mask=torch.ones(3, 4, dtype=torch.bool)), ValueError, "masked entirely"),
    "mask_dtype": (dict(atten_mask=torch.zeros(3, 4)), ValueError, "bool or uint8"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_fusion_attention_refusals(name):
    kwargs, error, match = REFUSED[name]
    kwargs = dict(kwargs)
    q, k, v = _make("BSH", 1, 2, 2, 3, 4, 8, F32)
    layout = kwargs.pop("input_layout", "BSH")
    with pytest.raises(error, match=match):
        npu.npu_fusion_attention(q, k, v, 2, layout, **kwargs)


FA_COMPILED = [  # layout, B, N, Nkv, Sq, Skv, D, mask kind, kwargs
    ("BSH", 2, 4, 4, 5, 7, 8, None, {}),
    ("BSH", 2, 4, 2, 5, 5, 8, "bool", dict(scale=0.25)),
    ("BNSD", 1, 2, 2, 4, 6, 16, "uint8", dict(scale=0.5)),
    ("BNSD", 2, 2, 1, 6, 6, 8, "causal3", dict(sparse_mode=3, scale=0.3)),
    ("BNSD", 1, 2, 2, 6, 6, 8, "band4", dict(sparse_mode=4, pre_tockens=2, next_tockens=0)),
]


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("fa", FA_COMPILED, ids=lambda c: f"{c[0]}-{c[7]}-{c[2]}x{c[3]}")
def test_fusion_attention_compiled(fa, dtype):
    layout, b, n, nkv, sq, skv, d, kind, kwargs = fa
    q, k, v = _make(layout, b, n, nkv, sq, skv, d, dtype)
    mask = {None: None, "bool": torch.rand(sq, skv) > 0.6, "uint8": (torch.rand(b, 1, sq, skv) > 0.6).to(torch.uint8),
            "causal3": _compressed(), "band4": _compressed()}[kind]
    if kind in ("bool", "uint8"):
        mask[..., 0] = 0

    def fn(q, k, v, *mask_arg):
        out = npu.npu_fusion_attention(q, k, v, n, layout, atten_mask=mask_arg[0] if mask_arg else None, **kwargs)
        return out[0], out[1], out[2]

    args = (q, k, v) if mask is None else (q, k, v, mask)
    got = check_compiled(fn, args, "FlashAttentionScore", kind="npu_ops").got
    keep = None if kind is None else (mask == 0 if kind in ("bool", "uint8") else
                                      _band(sq, skv, 10**6 if kind == "causal3" else 2, 0, skv - sq))
    want = _oracle(q, k, v, layout, n, nkv, kwargs.get("scale", 1.0), keep)[0]
    assert_close(got[0], want.to(dtype), "npu_ops", equal_nan=True)


def test_fusion_attention_layouts_torchair_does_not_lower():
    q, k, v = _make("SBH", 1, 2, 2, 3, 3, 8, F16)
    fn = lambda q, k, v: npu.npu_fusion_attention(q, k, v, 2, "SBH")[0]  # noqa: E731
    with pytest.raises(Exception, match="input_layout != BSH & BNSD"):  # TorchAir's converter, also on an NPU
        Npugraph(fn)(q, k, v)


# ---- npu_prompt_flash_attention / npu_incre_flash_attention ----

PFA_CASES = [  # layout, B, N, Nkv (0 = N), Sq, Skv, D, mask kind, kwargs
    ("BSH", 2, 4, 0, 5, 7, 8, None, {}),
    ("BSH", 2, 4, 2, 5, 7, 8, "bool", dict(next_tokens=2147483647)),
    ("BSND", 1, 4, 1, 6, 6, 8, "causal_default_band", {}),        # mask + default next_tokens=0: causal
    ("BNSD", 2, 2, 2, 4, 6, 16, "int8_b1ss", dict(next_tokens=2147483647, scale_value=0.25)),
    ("BNSD_BSND", 1, 2, 2, 3, 5, 8, "uint8_bss", dict(next_tokens=2147483647)),
    ("BNSD", 1, 2, 2, 6, 8, 8, "mode3", dict(sparse_mode=3)),
]


def _pfa_inputs(layout, b, n, nkv, sq, skv, d, kind, dtype):
    q, k, v = _make("BNSD" if layout == "BNSD_BSND" else layout, b, n, nkv or n, sq, skv, d, dtype)
    mask = {None: None, "bool": torch.rand(sq, skv) > 0.6,
            "causal_default_band": torch.zeros(sq, skv, dtype=torch.bool),
            "int8_b1ss": (torch.rand(b, 1, sq, skv) > 0.6).to(torch.int8),
            "uint8_bss": (torch.rand(b, sq, skv) > 0.6).to(torch.uint8), "mode3": _compressed()}[kind]
    if kind in ("bool", "int8_b1ss", "uint8_bss"):
        mask[..., 0] = 0
    keep = {None: None, "causal_default_band": _band(sq, skv, 2147483647, 0, 0),
            "mode3": _band(sq, skv, 10**6, 0, skv - sq)}.get(
        kind, None if mask is None else (mask == 0).reshape(-1, 1, sq, skv) if mask.dim() == 3 else mask == 0)
    return q, k, v, mask, keep


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("pfa", PFA_CASES, ids=lambda c: f"{c[0]}-{c[7]}-{c[2]}x{c[3]}")
def test_prompt_flash_attention(pfa, dtype):
    layout, b, n, nkv, sq, skv, d, kind, kwargs = pfa
    q, k, v, mask, keep = _pfa_inputs(layout, b, n, nkv, sq, skv, d, kind, dtype)
    got = npu.npu_prompt_flash_attention(q, k, v, atten_mask=mask, num_heads=n, num_key_value_heads=nkv,
                                         input_layout=layout, **kwargs)
    in_layout = "BNSD" if layout == "BNSD_BSND" else layout
    want = _oracle(q, k, v, in_layout, n, nkv or n, kwargs.get("scale_value", 1.0), keep)[0]
    if layout == "BNSD_BSND":
        want = want.permute(0, 2, 1, 3)
    assert_close(got, want.to(dtype), "npu_ops", equal_nan=True)


def test_prompt_flash_attention_empty_kv_gives_zeros_and_refusals():
    q = torch.randn(1, 3, 8)
    out = npu.npu_prompt_flash_attention(q, torch.randn(1, 0, 8), torch.randn(1, 0, 8), num_heads=2)
    assert out.shape == q.shape and not out.any()
    with pytest.raises(ValueError, match="quant_scale2"):
        npu.npu_prompt_flash_attention(q, q, q, num_heads=2, quant_scale2=torch.ones(1))
    with pytest.raises(ValueError, match="TND"):
        npu.npu_prompt_flash_attention(q, q, q, num_heads=2, input_layout="TND")
    with pytest.raises(ValueError, match="int8"):
        npu.npu_prompt_flash_attention(q.to(torch.int8), q.to(torch.int8), q.to(torch.int8), num_heads=2)


IFA_CASES = [  # layout, B, N, Nkv (0 = N), Skv, D, mask kind, actual_seq_lengths
    ("BSH", 2, 4, 0, 7, 8, None, None),
    ("BSH", 2, 4, 2, 7, 8, "bool_bs", [3, 7]),
    ("BNSD", 3, 2, 1, 6, 16, "uint8_b11s", [4]),
    ("BSND", 2, 4, 4, 5, 8, None, [1, 5, 9]),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ifa", IFA_CASES, ids=lambda c: f"{c[0]}-{c[6]}-{c[7]}")
def test_incre_flash_attention(ifa, dtype):
    layout, b, n, nkv, skv, d, kind, lengths = ifa
    q, k, v = _make(layout, b, n, nkv or n, 1, skv, d, dtype)
    mask = {None: None, "bool_bs": torch.rand(b, skv) > 0.6,
            "uint8_b11s": (torch.rand(b, 1, 1, skv) > 0.6).to(torch.uint8)}[kind]
    if mask is not None:
        mask[..., 0] = 0
    keep = torch.ones(b, 1, 1, skv, dtype=torch.bool) if mask is None else (mask == 0).reshape(b, 1, 1, skv)
    if lengths is not None:
        per_batch = (lengths * b)[:b] if len(lengths) == 1 else lengths[:b]
        keep = keep & (torch.arange(skv)[None, :] < torch.tensor(per_batch)[:, None]).reshape(b, 1, 1, skv)
    got = npu.npu_incre_flash_attention(q, k, v, atten_mask=mask, actual_seq_lengths=lengths, num_heads=n,
                                        num_key_value_heads=nkv, input_layout=layout, scale_value=0.35)
    assert_close(got, _oracle(q, k, v, layout, n, nkv or n, 0.35, keep)[0].to(dtype), "npu_ops", equal_nan=True)


def test_incre_flash_attention_refusals():
    q, k = torch.randn(1, 1, 8), torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match="block_table .PagedAttention. needs actual_seq_lengths_kv"):
        npu.npu_incre_flash_attention(q, k, k, num_heads=2, block_table=torch.zeros(1, 1, dtype=torch.int32),
                                      block_size=4)
    with pytest.raises(ValueError, match="masked entirely"):
        npu.npu_incre_flash_attention(q, k, k, num_heads=2, actual_seq_lengths=[0])


@pytest.mark.parametrize("dtype", (F16, F32))
@pytest.mark.parametrize("pfa", PFA_CASES, ids=lambda c: f"{c[0]}-{c[7]}-{c[2]}x{c[3]}")
def test_prompt_flash_attention_compiled(pfa, dtype):
    layout, b, n, nkv, sq, skv, d, kind, kwargs = pfa
    q, k, v, mask, _ = _pfa_inputs(layout, b, n, nkv, sq, skv, d, kind, dtype)

    def fn(q, k, v, *m):
        return npu.npu_prompt_flash_attention(q, k, v, atten_mask=m[0] if m else None, num_heads=n,
                                              num_key_value_heads=nkv, input_layout=layout, **kwargs)

    check_compiled(fn, (q, k, v) if mask is None else (q, k, v, mask), "PromptFlashAttention", kind="npu_ops")


@pytest.mark.parametrize("dtype", (F16, BF16, F32))
@pytest.mark.parametrize("ifa", IFA_CASES, ids=lambda c: f"{c[0]}-{c[6]}-{c[7]}")
def test_incre_flash_attention_compiled(ifa, dtype):
    layout, b, n, nkv, skv, d, kind, lengths = ifa
    q, k, v = _make(layout, b, n, nkv or n, 1, skv, d, dtype)
    mask = {None: None, "bool_bs": torch.rand(b, skv) > 0.6,
            "uint8_b11s": (torch.rand(b, 1, 1, skv) > 0.6).to(torch.uint8)}[kind]
    if mask is not None:
        mask[..., 0] = 0

    def fn(q, k, v, *m):
        return npu.npu_incre_flash_attention(q, k, v, atten_mask=m[0] if m else None, actual_seq_lengths=lengths,
                                             num_heads=n, num_key_value_heads=nkv, input_layout=layout)

    check_compiled(fn, (q, k, v) if mask is None else (q, k, v, mask), "IncreFlashAttention", kind="npu_ops")


# ---- hand-built GE graphs: attribute values TorchAir's converters never set ----

FA_GRAPH_REFUSALS = {
    "keep_prob": (dict(keep_prob=0.9), {}, "keep_prob=0.89"),
    "q_start_idx": ({}, {"q_start_idx": torch.tensor([1])}, "q_start_idx"),
    "inner_precise": (dict(inner_precise=5), {}, "inner_precise=5"),
    "sparse_mode": (dict(sparse_mode=6), {"atten_mask": torch.ones(2048, 2048, dtype=torch.bool).triu(1)},
                    "sparse_mode 6"),
}


@pytest.mark.parametrize("name", sorted(FA_GRAPH_REFUSALS))
def test_flash_attention_score_refuses_in_a_hand_built_graph(name):
    attrs, extra, match = FA_GRAPH_REFUSALS[name]
    shape = [1, 3, 16]
    q = torch.randn(shape).to(F16)
    inputs = {"query": q, "key": q, "value": q, **{key: Const(value) for key, value in extra.items()}}
    outputs = [(F32, [1, 2, 3, 8]), (F32, [1, 2, 3, 8]), (F16, [0]), (F16, shape)]
    with pytest.raises(Exception, match=match) as error:
        run_node("FlashAttentionScore", inputs, outputs, name="attn", input_layout="BSH", head_num=2, **attrs)
    assert "attn" in str(error.value)


def test_flash_attention_score_with_start_indices_zero():
    shape = [1, 3, 16]
    q = torch.randn(shape).to(F16)
    inputs = {"query": q, "key": q, "value": q, "q_start_idx": Const(torch.tensor([0])),
              "kv_start_idx": Const(torch.tensor([0]))}
    outputs = [(F32, [1, 2, 3, 8]), (F32, [1, 2, 3, 8]), (F16, [0]), (F16, shape)]
    got = run_node("FlashAttentionScore", inputs, outputs, name="attn", input_layout="BSH", head_num=2,
                   scale_value=0.5, inner_precise=2)[3]
    assert_close(got, _oracle(q, q, q, "BSH", 2, 2, 0.5, None)[0].to(F16), "npu_ops", equal_nan=True)


@pytest.mark.parametrize("attrs,match", [(dict(block_size=128), "block_size=128"),
                                         (dict(inner_precise=2), "inner_precise=2")])
def test_incre_flash_attention_refuses_in_a_hand_built_graph(attrs, match):
    q, k = torch.randn(1, 1, 16).to(F16), torch.randn(1, 4, 16).to(F16)
    with pytest.raises(Exception, match=match):
        run_node("IncreFlashAttention", {"query": q, "key": [k], "value": [k]}, [(F16, [1, 1, 16])], name="attn",
                 input_layout="BSH", num_heads=2, num_key_value_heads=2, **attrs)


def test_rotary_interleave_is_lowered_with_its_mode():
    """TorchAir's converter maps npu_rotary_mul to RotaryMul (no mode attribute) off Ascend950 without
    `rotate`, so rotary_mode='interleave' computed the 'half' rotation in graph mode, also on an NPU;
    op_plugin's correction (op_plugin/_lowering/numeric_corrections.py, issue 34) lowers it to
    RotaryPositionEmbedding with its mode, as eager computes it (docs/torch-npu-ops.md)."""
    x, r1, r2 = torch.randn(1, 2, 3, 8), torch.rand(1, 2, 1, 8), torch.rand(1, 2, 1, 8)
    got = check_compiled(lambda x, a, b: npu.npu_rotary_mul(x, a, b, "interleave"), (x, r1, r2),
                         "RotaryPositionEmbedding", kind="npu_ops").got
    assert not torch.allclose(got, npu.npu_rotary_mul(x, r1, r2, "half"))


def test_a_yaml_op_cannot_take_a_defined_torch_npu_name(tmp_path):
    import op_plugin
    path = tmp_path / "clash.yaml"
    path.write_text(textwrap.dedent("""
        namespace: npu
        ops:
          - func: npu_swiglu(Tensor self, int dim=-1) -> Tensor
            outputs:
              - size: "self.shape"
                dtype: self
    """))
    with pytest.raises(op_plugin.YamlSpecError, match="already exists"):
        op_plugin.load_yaml(path)
    assert str(npu.npu_swiglu.default._schema) == "npu::npu_swiglu(Tensor input, int dim=-1) -> Tensor"


def test_no_backward_is_refused_not_differentiated_silently():
    """Ops torch_npu gives no autograd formula (npu_add_rms_norm; npu_rms_norm and npu_swiglu have one:
    tests/simulator/npu/test_backward.py)."""
    x, gamma = torch.randn(2, 4, requires_grad=True), torch.randn(4)
    with pytest.raises(NotImplementedError, match="npu_add_rms_norm has no backward"):
        npu.npu_add_rms_norm(x, x, gamma)
    with torch.no_grad():
        assert npu.npu_add_rms_norm(x, x, gamma)[0].shape == (2, 4)
    with pytest.raises(Exception, match="npu_add_rms_norm has no backward"):
        Npugraph(lambda t: npu.npu_add_rms_norm(t, t, gamma)[0].sum(), fullgraph=False)(
            torch.randn(2, 4, requires_grad=True))


def test_rotary_mul_with_rotate_compiles_to_rotary_position_embedding():
    x, r1, r2, rotate = torch.randn(2, 3, 2, 8), torch.rand(1, 3, 1, 8), torch.rand(1, 3, 1, 8), torch.randn(8, 8)
    got = check_compiled(lambda x, a, b, r: npu.npu_rotary_mul(x, a, b, "half", r), (x, r1, r2, rotate),
                         "RotaryPositionEmbedding", kind="npu_ops").got
    assert_close(got, r1 * x + r2 * (x @ rotate), "npu_ops", equal_nan=True)


def _quarter_rotation(d):
    r = torch.zeros(d, d)
    q = d // 4
    for i in range(q):  # x_rotate = cat(-x2, x1, -x4, x3) of the quarters
        r[q + i, i], r[i, q + i] = -1.0, 1.0
        r[3 * q + i, 2 * q + i], r[2 * q + i, 3 * q + i] = -1.0, 1.0
    return r


def _deinterleave(d):
    p = torch.zeros(d, d)  # x @ p = cat(x[::2], x[1::2])
    for i in range(d // 2):
        p[2 * i, i], p[2 * i + 1, d // 2 + i] = 1.0, 1.0
    return p


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", FLOATS)
def test_rotary_position_embedding_modes_in_a_hand_built_graph(mode, dtype, rotation):
    shape, rshape = [2, 3, 2, 8], [1, 3, 1, 8]
    x, cos, sin = torch.randn(shape).to(dtype), torch.rand(rshape).to(dtype), torch.rand(rshape).to(dtype)
    wide = x.float()
    part1, rotate = {0: (wide, rotation(8, "half")), 1: (wide, rotation(8, "interleave")),
                     2: (wide, _quarter_rotation(8)), 3: (wide @ _deinterleave(8), rotation(8, "half"))}[mode]
    want = part1 * cos.float() + (part1 @ rotate) * sin.float()
    (got,) = run_node("RotaryPositionEmbedding", [x, cos, sin, None], [(dtype, shape)], name="rope", mode=mode)
    assert_close(got, want.to(dtype), "npu_ops", equal_nan=True)


@pytest.mark.parametrize("name", ["fusion", "prompt"])
def test_attention_compiled_with_dynamic_sequence_length(name):
    fn = {"fusion": lambda q, k, v: npu.npu_fusion_attention(q, k, v, 4, "BSH", scale=0.3)[0],
          "prompt": lambda q, k, v: npu.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="BSH")}[name]
    ge_type = {"fusion": "FlashAttentionScore", "prompt": "PromptFlashAttention"}[name]
    compiled = Npugraph(fn, dynamic=True)
    for seq in (3, 5, 9):
        q = torch.randn(2, seq, 32).to(F16)
        run = compiled.check((q, q, q), ge_type if seq == 3 else None, kind="npu_ops")
        assert seq == 3 or not run.graphs, "recompiled for a new sequence length"
    assert compiled.compiles == 1


# ---- moved from tests/simulator/test_npu_ops_opcheck_attention.py ----

def _paged():
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    return (torch.randn(2, 1, 32).to(F16), torch.randn(4, 4, 16).to(F16), torch.randn(4, 4, 16).to(F16)), table


def _mla(v3=False):
    g = torch.Generator().manual_seed(0)
    x, w_dq, w_uq_qr = (torch.randn(*shape, generator=g) for shape in ((3, 16), (16, 12), (12, 24)))
    w_uk, w_dkv_kr = torch.randn(2, 8, 8, generator=g), torch.randn(16, 12, generator=g)
    tensors = [t.to(BF16) for t in (x, w_dq, w_uq_qr, w_uk, w_dkv_kr, torch.rand(12), torch.rand(8), torch.rand(3, 4),
                                    torch.rand(3, 4))]
    caches = [torch.zeros(2, 4, 1, 8, dtype=BF16), torch.zeros(2, 4, 1, 4, dtype=BF16)]
    index = torch.tensor([5, 0, 2])
    return (*tensors, *caches) if v3 else (*tensors, index, *caches), ({"cache_index": index} if v3 else {})


def _fused_paged():
    args, table = _paged()
    return args, dict(block_table=table, block_size=4, actual_seq_lengths_kv=[6, 3], num_heads=4,
                      num_key_value_heads=2, softmax_lse_flag=True)


def _fused_prompt():
    q, k = torch.randn(2, 4, 3, 8).to(F16), torch.randn(2, 2, 5, 8).to(F16)
    return (q, k, k), dict(actual_seq_lengths=[3, 2], actual_seq_lengths_kv=[5, 4], num_heads=4,
                           num_key_value_heads=2, input_layout="BNSD", sparse_mode=3,
                           atten_mask=torch.ones(2048, 2048, dtype=torch.bool).triu(1))


def _incre_paged():
    args, table = _paged()
    return args, dict(block_table=table, block_size=4, actual_seq_lengths=[6, 3], num_heads=4, num_key_value_heads=2)


def _fusion_grad():
    q = torch.randn(1, 3, 16).to(F16)
    out, smax, ssum, *_ = npu.npu_fusion_attention(q, q, q, 2, "BSH", scale=0.3)
    return (q, q, q, q, 2, "BSH"), dict(softmax_max=smax, softmax_sum=ssum, attention_in=out, scale_value=0.3)


CASES = {
    "npu_fused_infer_attention_score": _fused_paged,
    "npu_fused_infer_attention_score#prompt": _fused_prompt,
    "npu_incre_flash_attention": _incre_paged,
    "npu_prompt_flash_attention": lambda: ((torch.randn(2, 3, 16).to(F16),) * 3,
                                           dict(num_heads=2, actual_seq_lengths=[3, 1], actual_seq_lengths_kv=[2, 3])),
    # float32: opcheck compares eager and AOT gradients at float32 tolerances
    "npu_fusion_attention": lambda: ((torch.randn(1, 3, 16).requires_grad_(),) * 3 + (2, "BSH"), {}),
    "npu_fusion_attention_grad": _fusion_grad,
    "npu_mla_prolog": lambda: _mla(),
    "npu_mla_prolog_v2": lambda: _mla(),
    "npu_mla_prolog_v3": lambda: _mla(v3=True),
    "npu_mla_prolog_v3_functional": lambda: _mla(v3=True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name):
    args, kwargs = CASES[name]()
    torch.library.opcheck(getattr(npu, name.split("#")[0]).default, args, kwargs)
