"""npu_mla_prolog and npu_mla_prolog_v2 (MlaProlog, MlaPrologV2) on the CPU simulator: against the formulas
of CANN's MlaProlog design note written token by token and head by head in float64 (ROPE (15) as a
permutation and a rotation matrix), eagerly and compiled through TorchAir's converters."""
import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled

BF16 = torch.bfloat16
npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
HE, HCQ, N, D, DR, HCKV, BLOCKS, BLOCK = 32, 24, 2, 8, 8, 16, 4, 8


def _inputs(lead, seed=0):
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
    args = _inputs(lead)
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
    check_compiled(lambda *a: op(*a, rmsnorm_epsilon_cq=1e-6), _inputs((2, 3), seed=1),
                   "MlaProlog" if version == "v1" else "MlaPrologV2", kind="npu_ops")


def _v3_args(args):
    """v3's positional order: the caches before cache_index, which is a keyword."""
    return args[:9] + args[10:], dict(cache_index=args[9])


def test_mla_prolog_v3_writes_the_caches_in_place():
    args = _inputs((2, 3), seed=2)
    positional, kwargs = _v3_args(args)
    kv, kr = positional[9].clone(), positional[10].clone()
    positional = positional[:9] + (kv, kr)
    query, query_rope, *empty = npu.npu_mla_prolog_v3(*positional, **kwargs, qc_qr_scale=0.5, kc_scale=2.0)
    want = _oracle(*args, alpha_q=0.5, alpha_kv=2.0)
    assert_close((query, query_rope, kv, kr), [w.to(BF16) for w in want], "npu_ops", scale=2)
    assert [tuple(t.shape) for t in empty] == [(0,), (0,), (0,)]
    functional = npu.npu_mla_prolog_v3_functional(*args[:9], *args[10:], **kwargs, qc_qr_scale=0.5, kc_scale=2.0)
    assert_close(functional[5:], (kv, kr), "npu_ops")
    assert torch.equal(args[10], _inputs((2, 3), seed=2)[10]), "the functional form changed its input"


def test_mla_prolog_v3_compiled_updates_the_caches_as_eager():
    """The in-place op is functionalized to its _functional twin, which op_plugin's completion lowers
    (TorchAir's own converter imports torch_npu)."""
    positional, kwargs = _v3_args(_inputs((2, 3), seed=4))

    def fn(*a):
        return npu.npu_mla_prolog_v3(*a[:11], cache_index=a[11], qc_qr_scale=0.5, kc_scale=1.5)

    check_compiled(fn, tuple(positional) + (kwargs["cache_index"],), "MlaPrologV3", kind="npu_ops", mutated=(9, 10))


def test_mla_prolog_v3_refuses_reserved_arguments():
    positional, kwargs = _v3_args(_inputs((3,)))
    with pytest.raises(ValueError, match="tile_size=64"):
        npu.npu_mla_prolog_v3(*positional, **kwargs, tile_size=64)
    with pytest.raises(ValueError, match="query_norm_flag=True"):
        npu.npu_mla_prolog_v3(*positional, **kwargs, query_norm_flag=True)


def test_mla_prolog_v3_node():
    """MlaPrologV3 as a GE node, with every attr as TorchAir writes them: against the formulas."""
    from op_plugin._testing_harness import run_node

    args = _inputs((4,), seed=3)
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
    args = list(_inputs((3,)))
    with pytest.raises(ValueError, match="quant_scale_ckv .quantisation."):
        npu.npu_mla_prolog(*args, quant_scale_ckv=torch.ones(1, HCKV))
    with pytest.raises(ValueError, match="cache_mode 'PA_NZ'"):
        npu.npu_mla_prolog(*args, cache_mode="PA_NZ")
    args[9] = torch.tensor([1, 1, 2])
    with pytest.raises(ValueError, match="repeats a row"):
        npu.npu_mla_prolog(*args)
