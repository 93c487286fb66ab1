"""npu_fused_infer_attention_score (and _v2), npu_incre_flash_attention with a paged key/value cache and
npu_prompt_flash_attention with actual sequence lengths, on the CPU simulator: eager against a
head-by-head loop over gathered positions (not the code under test), and compiled through TorchAir's
converters (FusedInferAttentionScore, IncreFlashAttention, PromptFlashAttention) against eager.

npu_mla_prolog and npu_mla_prolog_v2 (MlaProlog, MlaPrologV2) on the CPU simulator: against the formulas
of CANN's MlaProlog design note written token by token and head by head in float64 (ROPE (15) as a
permutation and a rotation matrix), eagerly and compiled through TorchAir's converters."""
import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")


def _loop_attention(q, k, v, keep, scale):
    """q [N, s, D], k/v [KVN, n, D], keep [s, n] bool or None -> (out [N, s, Dv], lse [N, s]) in float64."""
    heads, group = q.shape[0], q.shape[0] // k.shape[0]
    out, lse = [], []
    for h in range(heads):
        scores = (q[h].double() @ k[h // group].double().T) * scale
        if keep is not None:
            scores = torch.where(keep, scores, torch.tensor(float("-inf"), dtype=torch.float64))
        lse.append(torch.logsumexp(scores, dim=-1))
        out.append(torch.softmax(scores, dim=-1) @ v[h // group].double())
    return torch.stack(out), torch.stack(lse)


def _to_layout(bnsd, layout):
    if layout == "BNSD":
        return bnsd.contiguous()
    bsnd = bnsd.transpose(1, 2).contiguous()
    return bsnd if layout == "BSND" else bsnd.reshape(bsnd.shape[0], bsnd.shape[1], -1)


def _page(kv, lengths, block_size, blocks_per_batch, as_bnbsd, generator):
    """Scatter kv [B, KVN, S, D] into a shuffled block pool: returns (pool, block_table int32)."""
    b, kvn, _, d = kv.shape
    total = b * blocks_per_batch + 2  # two blocks nobody uses, filled with noise
    order = torch.randperm(total, generator=generator)
    table = order[:b * blocks_per_batch].reshape(b, blocks_per_batch).to(torch.int32)
    pool = torch.randn(total, block_size, kvn, d, generator=generator).to(kv.dtype)
    for batch in range(b):
        for pos in range(lengths[batch]):  # one position at a time: block table[b, pos // bs], row pos % bs
            pool[table[batch, pos // block_size], pos % block_size] = kv[batch, :, pos]
    if as_bnbsd:
        return pool.permute(0, 2, 1, 3).contiguous(), table
    return pool.reshape(total, block_size, kvn * d), table


def _inputs(b, n, kvn, sq, skv, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, n, sq, d, generator=g).to(dtype), torch.randn(b, kvn, skv, d, generator=g).to(dtype),
            torch.randn(b, kvn, skv, d, generator=g).to(dtype), g)


def _expected(q, k, v, q_lens, kv_lens, keep_fn, scale, out_layout):
    """Oracle over BNSD inputs: rows past q_lens are 0, lse there +inf."""
    b, n, sq, _ = q.shape
    out = torch.zeros(b, n, sq, v.shape[-1], dtype=torch.float64)
    lse = torch.full((b, n, sq, 1), float("inf"), dtype=torch.float64)
    for batch in range(b):
        s, m = q_lens[batch], kv_lens[batch]
        keep = None if keep_fn is None else keep_fn(batch, s, m)
        o, l_ = _loop_attention(q[batch, :, :s], k[batch, :, :m], v[batch, :, :m], keep, scale)
        out[batch, :, :s], lse[batch, :, :s, 0] = o, l_
    return _to_layout(out, out_layout).to(q.dtype), lse.float()


def _tril(rows, cols, shift):
    i, j = torch.arange(rows)[:, None], torch.arange(cols)[None, :]
    return j - i <= shift


# ---- prompt branch (Q_S > 1) ----

PROMPT_CASES = [  # layout, B, N, KVN, Sq, Skv, D, actual q, actual kv, mask kind
    ("BSH", 2, 4, 4, 5, 7, 8, None, None, None),
    ("BSND", 2, 4, 2, 6, 6, 8, [4, 6], [5, 3], None),
    ("BNSD", 2, 2, 1, 4, 9, 16, [3], [9, 6], "mode3"),
    ("BNSD", 3, 4, 2, 5, 5, 8, [5, 2, 4], [5, 4, 5], "bool_b1ss"),
    ("BSH", 1, 2, 2, 6, 8, 8, None, [7], "mode0_band"),
    ("BNSD_BSND", 2, 2, 2, 4, 4, 8, [2, 4], None, "mode2"),
]


def _prompt_mask(kind, b, sq, skv, generator):
    """(atten_mask, sparse_mode/token kwargs, keep(batch, rows, cols))."""
    if kind is None:
        return None, {}, None
    if kind in ("mode2", "mode3"):
        mode = int(kind[-1])
        shift = (lambda rows, cols: 0) if mode == 2 else (lambda rows, cols: cols - rows)
        return (torch.ones(2048, 2048, dtype=torch.bool).triu(1), dict(sparse_mode=mode),
                lambda batch, rows, cols: _tril(rows, cols, shift(rows, cols)))
    if kind == "bool_b1ss":
        mask = torch.rand(b, 1, sq + 3, skv + 5, generator=generator) > 0.6  # padded: read from the top-left
        mask[..., 0] = False
        return mask, dict(sparse_mode=1), lambda batch, rows, cols: ~mask[batch, 0, :rows, :cols]
    mask = torch.zeros(sq, skv, dtype=torch.bool)  # mode0_band: the band alone
    i, j = torch.arange(sq)[:, None], torch.arange(skv)[None, :]
    return (mask, dict(pre_tokens=2, next_tokens=1),
            lambda batch, rows, cols: ((j - i <= 1) & (j - i >= -2))[:rows, :cols])


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("prompt", PROMPT_CASES, ids=lambda c: f"{c[0]}-{c[9]}-{c[7]}-{c[8]}")
def test_fused_infer_attention_prompt(prompt, dtype):
    layout, b, n, kvn, sq, skv, d, act_q, act_kv, kind = prompt
    q, k, v, g = _inputs(b, n, kvn, sq, skv, d, dtype)
    mask, extra, keep = _prompt_mask(kind, b, sq, skv, g)
    in_layout, out_layout = ("BNSD", "BSND") if layout == "BNSD_BSND" else (layout, layout)
    q_lens = [sq] * b if act_q is None else (act_q * b)[:b] if len(act_q) == 1 else act_q
    kv_lens = [skv] * b if act_kv is None else (act_kv * b)[:b] if len(act_kv) == 1 else act_kv
    out, lse = npu.npu_fused_infer_attention_score(
        _to_layout(q, in_layout), _to_layout(k, in_layout), _to_layout(v, in_layout), atten_mask=mask,
        actual_seq_lengths=act_q, actual_seq_lengths_kv=act_kv, num_heads=n, num_key_value_heads=kvn, scale=0.3,
        input_layout=layout, softmax_lse_flag=True, **extra)
    want, want_lse = _expected(q, k, v, q_lens, kv_lens, keep, 0.3, out_layout)
    assert_close(out, want, "npu_ops")
    assert_close(lse, want_lse, "npu_ops", dtype=dtype)


@pytest.mark.parametrize("prompt", PROMPT_CASES[1:4], ids=lambda c: f"{c[0]}-{c[9]}")
def test_fused_infer_attention_prompt_compiled(prompt):
    layout, b, n, kvn, sq, skv, d, act_q, act_kv, kind = prompt
    q, k, v, g = _inputs(b, n, kvn, sq, skv, d, F16)
    mask, extra, _ = _prompt_mask(kind, b, sq, skv, g)
    in_layout = "BNSD" if layout == "BNSD_BSND" else layout

    def fn(q, k, v, *m):
        return npu.npu_fused_infer_attention_score(
            q, k, v, atten_mask=m[0] if m else None, actual_seq_lengths=act_q, actual_seq_lengths_kv=act_kv,
            num_heads=n, num_key_value_heads=kvn, scale=0.3, input_layout=layout, softmax_lse_flag=True, **extra)

    args = tuple(_to_layout(t, in_layout) for t in (q, k, v)) + (() if mask is None else (mask,))
    check_compiled(fn, args, "FusedInferAttentionScore", kind="npu_ops")


# ---- decode branch (Q_S == 1) with PagedAttention ----

DECODE_CASES = [  # layout, B, N, KVN, D, block_size, blocks per batch, kv lengths, cache (blocknum, KVN, bs, D)
    ("BSH", 3, 4, 2, 8, 4, 3, [5, 12, 1], False),
    ("BSND", 2, 4, 4, 16, 8, 2, [9, 16], False),
    ("BNSD", 2, 8, 2, 8, 4, 4, [13, 7], True),
    ("BNSD", 4, 2, 1, 8, 16, 1, [3], False),
]


def _decode_inputs(case, dtype, seed=1):
    layout, b, n, kvn, d, bs, per_batch, lengths, bnbsd = case
    q, k, v, g = _inputs(b, n, kvn, 1, bs * per_batch, d, dtype, seed)
    kv_lens = (lengths * b)[:b] if len(lengths) == 1 else lengths
    k_pool, table = _page(k, kv_lens, bs, per_batch, bnbsd, g)
    # the value pool follows the key pool's block table
    pool4 = torch.randn(k_pool.shape, generator=g).to(dtype)
    view = pool4.reshape(pool4.shape[0], kvn, bs, d).permute(0, 2, 1, 3) if bnbsd else \
        pool4.reshape(pool4.shape[0], bs, kvn, d)
    for batch in range(b):
        for pos in range(kv_lens[batch]):
            view[table[batch, pos // bs], pos % bs] = v[batch, :, pos]
    return _to_layout(q, layout), q, k, v, k_pool, pool4, table, kv_lens


@pytest.mark.parametrize("dtype", (F16, BF16))
@pytest.mark.parametrize("paged", DECODE_CASES, ids=lambda c: f"{c[0]}-bs{c[5]}-{'BnNBsD' if c[8] else 'BnBsH'}")
def test_fused_infer_attention_paged_decode(paged, dtype):
    layout, b, n, kvn, d, bs, per_batch, lengths, bnbsd = paged
    query, q, k, v, k_pool, v_pool, table, kv_lens = _decode_inputs(paged, dtype)
    mask = torch.rand(b, bs * per_batch) > 0.7
    mask[:, 0] = False
    out, lse = npu.npu_fused_infer_attention_score(
        query, k_pool, v_pool, atten_mask=mask, block_table=table, block_size=bs, actual_seq_lengths_kv=lengths,
        num_heads=n, num_key_value_heads=kvn, scale=0.25, input_layout=layout, softmax_lse_flag=True,
        sparse_mode=3, pre_tokens=0, next_tokens=0)  # Q_S == 1: sparse_mode and tokens are ignored (documented)
    want, want_lse = _expected(q, k, v, [1] * b, kv_lens, lambda batch, rows, cols: ~mask[batch, :cols][None],
                               0.25, layout)
    assert_close(out, want, "npu_ops")
    assert_close(lse, want_lse, "npu_ops", dtype=dtype)
    inc = npu.npu_incre_flash_attention(query, k_pool, v_pool, atten_mask=mask, block_table=table, block_size=bs,
                                        actual_seq_lengths=lengths, num_heads=n, num_key_value_heads=kvn,
                                        scale_value=0.25, input_layout=layout)
    assert_close(inc, want, "npu_ops")
    out2, lse2 = npu.npu_fused_infer_attention_score_v2(
        query, k_pool, v_pool, atten_mask=mask, block_table=table, block_size=bs, actual_seq_kvlen=lengths,
        num_query_heads=n, num_key_value_heads=kvn, softmax_scale=0.25, input_layout=layout, return_softmax_lse=True)
    assert_close((out2, lse2), (want, want_lse), "npu_ops", dtype=dtype)


@pytest.mark.parametrize("op", ["fused", "fused_v2", "incre"])
@pytest.mark.parametrize("paged", DECODE_CASES[:3], ids=lambda c: f"{c[0]}-bs{c[5]}")
def test_paged_decode_compiled(paged, op):
    layout, b, n, kvn, d, bs, per_batch, lengths, bnbsd = paged
    query, _, _, _, k_pool, v_pool, table, _ = _decode_inputs(paged, F16)

    def fn(q, kp, vp, t):
        if op == "incre":
            return npu.npu_incre_flash_attention(q, kp, vp, block_table=t, block_size=bs, actual_seq_lengths=lengths,
                                                 num_heads=n, num_key_value_heads=kvn, scale_value=0.25,
                                                 input_layout=layout)
        if op == "fused_v2":
            return npu.npu_fused_infer_attention_score_v2(
                q, kp, vp, block_table=t, block_size=bs, actual_seq_kvlen=lengths, num_query_heads=n,
                num_key_value_heads=kvn, softmax_scale=0.25, input_layout=layout, return_softmax_lse=True)
        return npu.npu_fused_infer_attention_score(
            q, kp, vp, block_table=t, block_size=bs, actual_seq_lengths_kv=lengths, num_heads=n,
            num_key_value_heads=kvn, scale=0.25, input_layout=layout, softmax_lse_flag=True)

    ge_type = "IncreFlashAttention" if op == "incre" else "FusedInferAttentionScore"
    check_compiled(fn, (query, k_pool, v_pool, table), ge_type, kind="npu_ops")


# ---- npu_prompt_flash_attention with actual lengths; TND; MLA rope; refusals ----

def test_prompt_flash_attention_actual_lengths_eager_and_compiled():
    b, n, kvn, sq, skv, d = 3, 4, 2, 5, 7, 8
    q, k, v, _ = _inputs(b, n, kvn, sq, skv, d, F16, seed=3)
    act_q, act_kv = [5, 2, 4], [7, 3, 6]
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)

    def fn(q, k, v, m):
        return npu.npu_prompt_flash_attention(q, k, v, atten_mask=m, actual_seq_lengths=act_q,
                                              actual_seq_lengths_kv=act_kv, num_heads=n, num_key_value_heads=kvn,
                                              scale_value=0.3, input_layout="BNSD", sparse_mode=3)

    want = _expected(q, k, v, act_q, act_kv, lambda batch, rows, cols: _tril(rows, cols, cols - rows), 0.3,
                     "BNSD")[0]
    assert_close(fn(q, k, v, mask), want, "npu_ops")
    check_compiled(fn, (q, k, v, mask), "PromptFlashAttention", kind="npu_ops")


def test_fused_infer_attention_tnd():
    n, d, q_lens, kv_lens = 2, 8, [3, 1, 4], [5, 2, 4]
    g = torch.Generator().manual_seed(5)
    qs = [torch.randn(n, s, d, generator=g).to(BF16) for s in q_lens]
    ks = [torch.randn(n, s, d, generator=g).to(BF16) for s in kv_lens]
    vs = [torch.randn(n, s, d, generator=g).to(BF16) for s in kv_lens]
    tnd = [torch.cat([t.transpose(0, 1) for t in ts]) for ts in (qs, ks, vs)]
    cum = [list(torch.tensor(lens).cumsum(0).tolist()) for lens in (q_lens, kv_lens)]
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
    out, lse = npu.npu_fused_infer_attention_score(*tnd, atten_mask=mask, actual_seq_lengths=cum[0],
                                                   actual_seq_lengths_kv=cum[1], num_heads=n, scale=0.5,
                                                   input_layout="TND", sparse_mode=3, softmax_lse_flag=True)
    parts = [_loop_attention(q, k, v, _tril(q.shape[1], k.shape[1], k.shape[1] - q.shape[1]), 0.5)
             for q, k, v in zip(qs, ks, vs, strict=True)]
    assert_close(out, torch.cat([o.transpose(0, 1) for o, _ in parts]).to(BF16), "npu_ops")
    assert_close(lse, torch.cat([l_.transpose(0, 1) for _, l_ in parts]).unsqueeze(-1).float(), "npu_ops", dtype=BF16)


def test_fused_infer_attention_mla_rope_adds_its_scores():
    b, n, d, dr, skv = 2, 4, 16, 8, 6
    g = torch.Generator().manual_seed(9)
    q, qr = torch.randn(b, n, 1, d, generator=g).to(F16), torch.randn(b, n, 1, dr, generator=g).to(F16)
    k, kr = torch.randn(b, 1, skv, d, generator=g).to(F16), torch.randn(b, 1, skv, dr, generator=g).to(F16)
    out, _ = npu.npu_fused_infer_attention_score(q, k, k, query_rope=qr, key_rope=kr, num_heads=n,
                                                 num_key_value_heads=1, scale=0.2, input_layout="BNSD")
    want = [(_loop_attention(torch.cat([q[i], qr[i]], -1), torch.cat([k[i], kr[i]], -1), k[i], None, 0.2)[0])
            for i in range(b)]
    assert_close(out, torch.stack(want).to(F16), "npu_ops")


REFUSALS = {  # kwargs -> error match
    "antiquant": (dict(antiquant_scale=torch.ones(2)), ValueError, "antiquant_scale"),
    "pse_shift": (dict(pse_shift=torch.zeros(1, 2, 1, 4, dtype=F16)), ValueError, "pse_shift"),
    "left_padding": (dict(kv_padding_size=torch.zeros(1, dtype=torch.int64)), ValueError, "kv_padding"),
    "nz_cache": (dict(block_table=torch.zeros(1, 1, dtype=torch.int32), block_size=4, actual_seq_lengths_kv=[4],
                      nz=True), ValueError, "NZ layout"),
    "no_kv_lengths": (dict(block_table=torch.zeros(1, 1, dtype=torch.int32), block_size=4), ValueError,
                      "needs actual_seq_lengths_kv"),
    "sparse_mode_6": (dict(sparse_mode=6, sq=3), ValueError, "sparse_mode 6"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_fused_infer_attention_refusals(name):
    kwargs, error, match = dict(REFUSALS[name][0]), REFUSALS[name][1], REFUSALS[name][2]
    sq = kwargs.pop("sq", 1)
    q, k = torch.randn(1, 2, sq, 8).to(F16), torch.randn(1, 2, 4, 8).to(F16)
    if kwargs.pop("nz", False):
        k = torch.randn(1, 2, 1, 4, 8).to(F16)
    with pytest.raises(error, match=match):
        npu.npu_fused_infer_attention_score(q, k, k, num_heads=2, input_layout="BNSD", **kwargs)


def test_fused_infer_attention_takes_half_types_only():
    q = torch.randn(1, 2, 1, 8)
    with pytest.raises(ValueError, match="float16, bfloat16"):
        npu.npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="BNSD")


def test_fused_infer_attention_tnd_compiled():
    n, d = 2, 8
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(t, n, d, generator=g).to(BF16) for t in (8, 11, 11))
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)

    def fn(q, k, v, m):
        return npu.npu_fused_infer_attention_score(q, k, v, atten_mask=m, actual_seq_lengths=[3, 4, 8],
                                                   actual_seq_lengths_kv=[5, 7, 11], num_heads=n, scale=0.5,
                                                   input_layout="TND", sparse_mode=3, softmax_lse_flag=True)

    check_compiled(fn, (q, k, v, mask), "FusedInferAttentionScore", kind="npu_ops")


@pytest.mark.parametrize("extra,match", [
    ({"quant_scale2": torch.ones(1)}, "quant_scale2 is not implemented"),
    ({"out_dtype": 1}, "out_dtype=1"),
    ({"learnable_sink": torch.ones(2, dtype=BF16)}, "learnable_sink"),
], ids=["quant_scale2", "out_dtype", "learnable_sink"])
def test_fused_infer_attention_score_node_refusals(extra, match):
    from op_plugin._testing_harness import Const, run_node

    q, k = torch.randn(1, 2, 1, 8).to(F16), torch.randn(1, 2, 4, 8).to(F16)
    tensors = {name: Const(value) for name, value in extra.items() if isinstance(value, torch.Tensor)}
    attrs = {name: value for name, value in extra.items() if not isinstance(value, torch.Tensor)}
    with pytest.raises(Exception, match=match) as error:
        run_node("FusedInferAttentionScore", {"query": q, "key": [k], "value": [k], **tensors},
                 [(F16, [1, 2, 1, 8]), (F32, [0])], name="fia", num_heads=2, input_layout="BNSD", **attrs)
    assert "fia" in str(error.value)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_fused_infer_attention_chunked_prefill_on_a_paged_cache(compiled):
    """Q_S > 1 against a paged cache (a prefill chunk after cached context): sparse_mode 3 puts each
    batch's causal corner at (its q length, its kv length)."""
    b, n, kvn, d, bs, per_batch, sq = 2, 4, 2, 8, 4, 3, 3
    q, k, v, g = _inputs(b, n, kvn, sq, bs * per_batch, d, BF16, seed=11)
    act_q, act_kv = [3, 2], [10, 7]
    k_pool, table = _page(k, act_kv, bs, per_batch, True, g)
    v_pool = torch.randn(k_pool.shape, generator=g).to(BF16)
    for batch in range(b):
        for pos in range(act_kv[batch]):
            v_pool[table[batch, pos // bs], :, pos % bs] = v[batch, :, pos]
    mask = torch.ones(2048, 2048, dtype=torch.bool).triu(1)

    def fn(q, kp, vp, t, m):
        return npu.npu_fused_infer_attention_score(
            q, kp, vp, atten_mask=m, block_table=t, block_size=bs, actual_seq_lengths=act_q,
            actual_seq_lengths_kv=act_kv, num_heads=n, num_key_value_heads=kvn, scale=0.3, input_layout="BNSD",
            sparse_mode=3, softmax_lse_flag=True)

    if compiled:
        check_compiled(fn, (q, k_pool, v_pool, table, mask), "FusedInferAttentionScore", kind="npu_ops")
        return
    out, lse = fn(q, k_pool, v_pool, table, mask)
    want, want_lse = _expected(q, k, v, act_q, act_kv, lambda batch, rows, cols: _tril(rows, cols, cols - rows), 0.3,
                               "BNSD")
    assert_close(out, want, "npu_ops")
    assert_close(lse, want_lse, "npu_ops", dtype=BF16)


# ---- moved from tests/simulator/test_npu_ops_mla_prolog.py ----

HE, HCQ, N, D, DR, HCKV, BLOCKS, BLOCK = 32, 24, 2, 8, 8, 16, 4, 8


def _inputs_mla(lead, seed=0):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, std=0.3):
        return (torch.randn(*shape, generator=g) * std).to(BF16)

    tokens = int(torch.tensor(lead).prod())
    index = torch.randperm(BLOCKS * BLOCK, generator=g)[:tokens].reshape(lead)
    angle = torch.rand(*lead, DR // 2, generator=g) * 3
    cos, sin = torch.cat([angle.cos()] * 2, -1).to(BF16), torch.cat([angle.sin()] * 2, -1).to(BF16)
    return (rnd(*lead, HE, std=1.0), rnd(HE, HCQ), rnd(HCQ, N * (D + DR)), rnd(N, D, HCKV), rnd(HE, HCKV + DR),
            rnd(HCQ, std=1.0), rnd(HCKV, std=1.0), sin, cos, index, rnd(BLOCKS, BLOCK, 1, HCKV),
            rnd(BLOCKS, BLOCK, 1, DR))


def _rope_matrix(d):
    """x -> formula (15): P de-interleaves (evens then odds), R rotates halves; returns (P, P @ R)."""
    p, r = torch.zeros(d, d, dtype=torch.float64), torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        p[2 * i, i], p[2 * i + 1, d // 2 + i] = 1.0, 1.0
        r[d // 2 + i, i], r[i, d // 2 + i] = -1.0, 1.0  # x @ r = cat(-second half, first half)
    return p, p @ r


def _oracle(x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos, index, kv, kr, eps=1e-5, alpha_q=1.0,
            alpha_kv=1.0):
    f = [t.double() for t in (x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos)]
    x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos = f
    perm, perm_rot = _rope_matrix(DR)
    lead = x.shape[:-1]
    x, sin, cos, index = x.reshape(-1, HE), sin.reshape(-1, DR), cos.reshape(-1, DR), index.reshape(-1)
    kv_out, kr_out = kv.double().clone(), kr.double().clone()
    query, query_rope = torch.zeros(x.shape[0], N, HCKV, dtype=torch.float64), torch.zeros(x.shape[0], N, DR,
                                                                                             dtype=torch.float64)
    for t in range(x.shape[0]):
        cq = x[t] @ w_dq
        cq = alpha_q * cq / torch.sqrt((cq * cq).mean() + eps) * g_cq
        up = cq @ w_uq_qr
        for h in range(N):
            query[t, h] = up[h * D:(h + 1) * D] @ w_uk[h]
            r = up[N * D + h * DR:N * D + (h + 1) * DR]
            query_rope[t, h] = (r @ perm) * cos[t] + (r @ perm_rot) * sin[t]
        down = x[t] @ w_dkv_kr
        ckv = alpha_kv * down[:HCKV] / torch.sqrt((down[:HCKV] ** 2).mean() + eps) * g_ckv
        slot = int(index[t])
        kv_out[slot // BLOCK, slot % BLOCK, 0] = ckv
        kr_out[slot // BLOCK, slot % BLOCK, 0] = (down[HCKV:] @ perm) * cos[t] + (down[HCKV:] @ perm_rot) * sin[t]
    return query.reshape(*lead, N, HCKV), query_rope.reshape(*lead, N, DR), kv_out, kr_out


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("lead", [(5,), (2, 3)], ids=["T", "BS"])
def test_mla_prolog_matches_the_formulas(lead, version):
    args = _inputs_mla(lead)
    op = npu.npu_mla_prolog if version == "v1" else npu.npu_mla_prolog_v2
    got = op(*args)
    want = _oracle(*args)
    assert_close(got[:4], [w.to(BF16) for w in want], "npu_ops", scale=2)
    if version == "v2":
        assert got[4].shape == (1,) and got[4].dtype == torch.float32
    untouched = torch.ones(BLOCKS * BLOCK, dtype=torch.bool)
    untouched[args[9].reshape(-1)] = False
    assert torch.equal(got[2].reshape(-1, HCKV)[untouched], args[10].reshape(-1, HCKV)[untouched])


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_mla_prolog_compiled(version):
    op = npu.npu_mla_prolog if version == "v1" else npu.npu_mla_prolog_v2
    check_compiled(lambda *a: op(*a, rmsnorm_epsilon_cq=1e-6), _inputs_mla((2, 3), seed=1),
                   "MlaProlog" if version == "v1" else "MlaPrologV2", kind="npu_ops")


def _v3_args(args):
    """v3's positional order: the caches before cache_index, which is a keyword."""
    return args[:9] + args[10:], dict(cache_index=args[9])


def test_mla_prolog_v3_writes_the_caches_in_place():
    args = _inputs_mla((2, 3), seed=2)
    positional, kwargs = _v3_args(args)
    kv, kr = positional[9].clone(), positional[10].clone()
    positional = positional[:9] + (kv, kr)
    query, query_rope, *empty = npu.npu_mla_prolog_v3(*positional, **kwargs, qc_qr_scale=0.5, kc_scale=2.0)
    want = _oracle(*args, alpha_q=0.5, alpha_kv=2.0)
    assert_close((query, query_rope, kv, kr), [w.to(BF16) for w in want], "npu_ops", scale=2)
    assert [tuple(t.shape) for t in empty] == [(0,), (0,), (0,)]
    functional = npu.npu_mla_prolog_v3_functional(*args[:9], *args[10:], **kwargs, qc_qr_scale=0.5, kc_scale=2.0)
    assert_close(functional[5:], (kv, kr), "npu_ops")
    assert torch.equal(args[10], _inputs_mla((2, 3), seed=2)[10]), "the functional form changed its input"


def test_mla_prolog_v3_compiled_updates_the_caches_as_eager():
    """The in-place op is functionalized to its _functional twin, which op_plugin's completion lowers
    (TorchAir's own converter imports torch_npu)."""
    positional, kwargs = _v3_args(_inputs_mla((2, 3), seed=4))

    def fn(*a):
        return npu.npu_mla_prolog_v3(*a[:11], cache_index=a[11], qc_qr_scale=0.5, kc_scale=1.5)

    check_compiled(fn, tuple(positional) + (kwargs["cache_index"],), "MlaPrologV3", kind="npu_ops", mutated=(9, 10))


def test_mla_prolog_v3_refuses_reserved_arguments():
    positional, kwargs = _v3_args(_inputs_mla((3,)))
    with pytest.raises(ValueError, match="tile_size=64"):
        npu.npu_mla_prolog_v3(*positional, **kwargs, tile_size=64)
    with pytest.raises(ValueError, match="query_norm_flag=True"):
        npu.npu_mla_prolog_v3(*positional, **kwargs, query_norm_flag=True)


def test_mla_prolog_v3_node():
    """MlaPrologV3 as a GE node, with every attr as TorchAir writes them: against the formulas."""
    from op_plugin._testing_harness import run_node

    args = _inputs_mla((4,), seed=3)
    names = ["token_x", "weight_dq", "weight_uq_qr", "weight_uk", "weight_dkv_kr", "rmsnorm_gamma_cq",
             "rmsnorm_gamma_ckv", "rope_sin", "rope_cos", "cache_index", "kv_cache", "kr_cache"]
    inputs = dict(zip(names, args, strict=True))
    outputs = [(BF16, [4, N, HCKV]), (BF16, [4, N, DR]), (BF16, list(args[10].shape)), (BF16, list(args[11].shape)),
               (torch.float32, [0]), (BF16, [0]), (torch.float32, [0])]
    attrs = dict(query_norm_flag=False, weight_quant_mode=0, kv_cache_quant_mode=0, query_quant_mode=0,
                 ckvkr_repo_mode=0, quant_scale_repo_mode=0, tile_size=128)  # TorchAir writes every attr
    got = run_node("MlaPrologV3", inputs, outputs, name="mla", qc_qr_scale=0.5, kc_scale=2.0, **attrs)
    want = _oracle(*args, alpha_q=0.5, alpha_kv=2.0)
    assert_close(got[:4], [w.to(BF16) for w in want], "npu_ops", scale=2)


def test_mla_prolog_refusals():
    args = list(_inputs_mla((3,)))
    with pytest.raises(ValueError, match="quant_scale_ckv .quantisation."):
        npu.npu_mla_prolog(*args, quant_scale_ckv=torch.ones(1, HCKV))
    with pytest.raises(ValueError, match="cache_mode 'PA_NZ'"):
        npu.npu_mla_prolog(*args, cache_mode="PA_NZ")
    args[9] = torch.tensor([1, 1, 2])
    with pytest.raises(ValueError, match="repeats a row"):
        npu.npu_mla_prolog(*args)
