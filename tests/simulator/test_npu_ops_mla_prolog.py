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


def _oracle(x, w_dq, w_uq_qr, w_uk, w_dkv_kr, g_cq, g_ckv, sin, cos, index, kv, kr, eps=1e-5):
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
        cq = cq / torch.sqrt((cq * cq).mean() + eps) * g_cq
        up = cq @ w_uq_qr
        for h in range(N):
            query[t, h] = up[h * D:(h + 1) * D] @ w_uk[h]
            r = up[N * D + h * DR:N * D + (h + 1) * DR]
            query_rope[t, h] = (r @ perm) * cos[t] + (r @ perm_rot) * sin[t]
        down = x[t] @ w_dkv_kr
        ckv = down[:HCKV] / torch.sqrt((down[:HCKV] ** 2).mean() + eps) * g_ckv
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


def test_mla_prolog_refusals():
    args = list(_inputs((3,)))
    with pytest.raises(ValueError, match="quant_scale_ckv .quantisation."):
        npu.npu_mla_prolog(*args, quant_scale_ckv=torch.ones(1, HCKV))
    with pytest.raises(ValueError, match="cache_mode 'PA_NZ'"):
        npu.npu_mla_prolog(*args, cache_mode="PA_NZ")
    args[9] = torch.tensor([1, 1, 2])
    with pytest.raises(ValueError, match="repeats a row"):
        npu.npu_mla_prolog(*args)
