"""Backward GE kernels of softmax, the normalisations, the losses and the embedding (kernels/
activation_softmax.py, norm.py, norm_batch.py, loss.py, index_embedding.py), through TorchAir's
converters against eager; hand-built graphs for the types TorchAir emits only on arch35
(BatchNormGradV3, GroupNormGrad).

Batch norm statistics: off arch35 (the simulator) TorchAir feeds BatchNormV3's ``save_rstd`` to
BNTrainingUpdateGrad/BNTrainingReduceGrad as ``batch_variance``, and CANN's BatchNormV3 stores the
variance there on those parts. So a compiled native_batch_norm_backward is given the variance where
eager takes invstd; the oracle gets the true invstd.
"""
from __future__ import annotations

import functools

import pytest
import torch

from op_plugin._testing_harness import assert_close, check_compiled, run_node

aten = torch.ops.aten
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# npugraph against eager computed in float32 and rounded once, within the "grad" tolerances (times `scale`)
check_grad_case = functools.partial(check_compiled, oracle_in_float32=True, kind="grad")

_IDS = {F32: "fp32", F16: "fp16", BF16: "bf16"}


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=_IDS.get)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_grad(dtype, dim):
    torch.manual_seed(0)
    y = torch.softmax(torch.randn(4, 6), dim=dim).to(dtype)
    g = torch.randn(4, 6).to(dtype)
    check_grad_case(lambda a, b: aten._softmax_backward_data(a, b, dim, dtype), (g, y), "SoftmaxGrad",
                    oracle=lambda a, b: aten._softmax_backward_data(a, b, dim, F32), scale=4.0)


def test_softmax_grad_1d():
    y, g = torch.softmax(torch.randn(16), 0), torch.randn(16)
    check_grad_case(lambda a, b: aten._softmax_backward_data(a, b, -1, F32), (g, y), "SoftmaxGrad")


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=_IDS.get)
@pytest.mark.parametrize("dim", [-1, 0, 2])
def test_log_softmax_grad(dtype, dim):
    torch.manual_seed(0)
    y = torch.log_softmax(torch.randn(3, 4, 5), dim=dim).to(dtype)
    g = torch.randn(3, 4, 5).to(dtype)
    check_grad_case(lambda a, b: aten._log_softmax_backward_data(a, b, dim, dtype), (g, y), "LogSoftmaxGrad",
                    oracle=lambda a, b: aten._log_softmax_backward_data(a, b, dim, F32), scale=4.0)


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=_IDS.get)
@pytest.mark.parametrize("shape,normalized", [((4, 8), [8]), ((2, 3, 8), [8]), ((2, 3, 4, 5), [4, 5])])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no_weight"])
def test_layer_norm_grad(dtype, shape, normalized, affine):
    torch.manual_seed(0)
    x = torch.randn(shape)
    w = torch.randn(normalized) if affine else None
    b = torch.randn(normalized) if affine else None
    _, mean, rstd = aten.native_layer_norm(x, normalized, w, b, 1e-5)
    g = torch.randn(shape)
    def cast(t):
        return None if t is None else t.to(dtype)

    args = (cast(g), cast(x), cast(mean), cast(rstd), cast(w), cast(b))

    mask = [True, affine, affine]  # what AOT asks for a LayerNorm with and without elementwise_affine

    def fn(g, x, mean, rstd, w, b):
        grads = aten.native_layer_norm_backward(g, x, normalized, mean, rstd, w, b, mask)
        return grads if affine else grads[0]

    oracle = None
    check_grad_case(fn, args, "LayerNormGradV3", oracle=oracle, scale=8.0)


# ---- batch norm -------------------------------------------------------------------------------------

def _bn_stats(x, eps):
    dims = [0] + list(range(2, x.dim()))
    mean = x.mean(dims)
    var = x.var(dims, unbiased=False)
    return mean, var, torch.rsqrt(var + eps)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 4)])
@pytest.mark.parametrize("dtype", [F32, F16], ids=_IDS.get)
def test_native_batch_norm_backward_training(shape, dtype):
    torch.manual_seed(0)
    eps = 1e-5
    x, g = torch.randn(shape), torch.randn(shape)
    w = torch.randn(shape[1])
    mean, var, invstd = _bn_stats(x, eps)
    running_mean, running_var = torch.zeros(shape[1]), torch.ones(shape[1])

    def fn(g, x, w, save_mean, save_stat):
        return aten.native_batch_norm_backward(g, x, w, running_mean, running_var, save_mean, save_stat, True, eps,
                                               [True, True, True])

    expected_type = "BN3DTrainingUpdateGrad" if len(shape) == 5 else "BNTrainingUpdateGrad"
    # 16-bit x with float32 weight (autocast); a float16 weight would need float16 diff_scale, which
    # BNTrainingUpdateGrad (float32 outputs only) does not give: see the test below.
    check_grad_case(fn, (g.to(dtype), x.to(dtype), w, mean, var), [expected_type, "BNTrainingReduceGrad"],
                    oracle=lambda g, x, w, m, _var: fn(g, x, w, m, invstd), scale=8.0)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 5)])
def test_native_batch_norm_backward_inference(shape):
    torch.manual_seed(0)
    eps = 1e-3
    x, g, w = torch.randn(shape), torch.randn(shape), torch.randn(shape[1])
    running_mean, running_var = torch.randn(shape[1]), torch.rand(shape[1]) + 0.5

    def fn(g, x, w, rm, rv):
        return aten.native_batch_norm_backward(g, x, w, rm, rv, None, None, False, eps, [True, True, True])

    check_grad_case(fn, (g, x, w, running_mean, running_var), "BNInferGrad", scale=4.0)


def test_group_norm_backward_off_arch35_goes_through_bn_training_grads():
    torch.manual_seed(0)
    x, g, w = torch.randn(4, 6, 5), torch.randn(4, 6, 5), torch.randn(6)
    _, mean, rstd = aten.native_group_norm(x, w, None, 4, 6, 5, 3, 1e-5)

    def fn(g, x, mean, rstd, w):
        return aten.native_group_norm_backward(g, x, mean, rstd, w, 4, 6, 5, 3, [True, True, True])

    check_grad_case(fn, (g, x, mean, rstd, w), "BNTrainingReduceGrad", scale=20.0)


def test_batch_norm_backward_float16_weight_is_refused_not_miscast():
    """BNTrainingUpdateGrad's diff_scale is float32 whatever x is; TorchAir does not cast it, so a float16
    weight's grad has the wrong dtype and the executor says so (no silent cast)."""
    x, g, w = torch.randn(2, 3, 4, 5).half(), torch.randn(2, 3, 4, 5).half(), torch.randn(3).half()
    mean, var, _ = _bn_stats(x.float(), 1e-5)

    def fn(g, x, w, m, v):
        return aten.native_batch_norm_backward(g, x, w, None, None, m, v, True, 1e-5, [True, True, True])

    with pytest.raises(Exception, match="BNTrainingUpdateGrad.*dtype mismatch"):
        check_grad_case(fn, (g, x, w, mean, var), "BNTrainingUpdateGrad")


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_grad_v3_hand_built(training):
    """BatchNormGradV3 (arch35 only): save_rstd is the reciprocal std in training; inference uses the
    running statistics with epsilon."""
    torch.manual_seed(0)
    eps = 1e-3
    x, g, w = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5), torch.randn(3)
    mean, _var, invstd = _bn_stats(x, eps)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    got = run_node("BatchNormGradV3", [g, x, w, rm, rv, mean, invstd],
                   [(F32, x.shape), (F32, [3]), (F32, [3])], is_training=training, epsilon=eps)
    want = aten.native_batch_norm_backward(g, x, w, rm, rv, mean, invstd, training, eps, [True, True, True])
    assert_close(list(got), list(want), "accumulated")


def test_group_norm_grad_hand_built():
    """GroupNormGrad (arch35 only): x [N, C, HxW], mean/rstd [N, G]."""
    torch.manual_seed(0)
    x, g, w = torch.randn(3, 6, 10), torch.randn(3, 6, 10), torch.randn(6)
    _, mean, rstd = aten.native_group_norm(x, w, None, 3, 6, 10, 2, 1e-5)
    got = run_node("GroupNormGrad", [g, mean, rstd, x, w],
                   [(F32, x.shape), (F32, [6]), (F32, [6])], num_groups=2)
    want = aten.native_group_norm_backward(g, x, mean, rstd, w, 3, 6, 10, 2, [True, True, True])
    assert_close(list(got), list(want), "accumulated")


# ---- losses and embedding -----------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("rows", [5, None], ids=["2d", "1d"])
def test_nll_loss_grad(reduction, weighted, rows):
    torch.manual_seed(0)
    shape = (rows, 4) if rows else (4,)
    x = torch.log_softmax(torch.randn(shape), -1)
    if rows is None and not weighted:
        pytest.skip("TorchAir's converter builds the default weight with GatherV2(Shape(x), 1): 1-D x without "
                    "weight fails in the converter's own graph, on an NPU too")
    target = torch.tensor([0, 3, 1, 3, 2]) if rows else torch.tensor(3)
    if rows:
        target[2] = -100  # ignore_index
    weight = torch.rand(4) + 0.5 if weighted else None
    _, total_weight = aten.nll_loss_forward(x, target, weight, reduction, -100)
    g = torch.randn(rows) if (reduction == 0 and rows) else torch.randn(())

    def fn(g, x, target, weight, total_weight):
        return aten.nll_loss_backward(g, x, target, weight, reduction, -100, total_weight)

    check_grad_case(fn, (g, x, target, weight, total_weight), "NLLLossGrad")


@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", [F32, F16], ids=_IDS.get)
def test_mse_loss_grad(reduction, dtype):
    torch.manual_seed(0)
    x, y = torch.randn(3, 4, 5).to(dtype), torch.randn(3, 4, 5).to(dtype)
    g = (torch.randn(3, 4, 5) if reduction == 0 else torch.randn(())).to(dtype)
    check_grad_case(lambda g, x, y: aten.mse_loss_backward(g, x, y, reduction), (g, x, y), "MseLossGrad", scale=4.0)


@pytest.mark.parametrize("padding_idx,scale", [(-1, False), (2, False), (-1, True), (3, True)])
@pytest.mark.parametrize("dtype", [F32, F16], ids=_IDS.get)
def test_embedding_dense_grad(padding_idx, scale, dtype):
    torch.manual_seed(0)
    indices = torch.tensor([[1, 2, 2, 5], [0, 2, 3, 1]])
    g = torch.randn(2, 4, 3).to(dtype)

    def fn(g, indices):
        return aten.embedding_dense_backward(g, indices, 7, padding_idx, scale)

    check_grad_case(fn, (g, indices), "EmbeddingDenseGrad", scale=4.0)


def test_sync_batch_norm_backward_reduce_and_elemt_hand_built():
    """aten.batch_norm_backward_reduce/elemt have no CPU kernel (eager cannot run them here), so the two GE
    types are checked in hand-built graphs against torch's documented formulas."""
    torch.manual_seed(0)
    x, g, w = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5), torch.randn(3)
    mean, _var, invstd = _bn_stats(x, 1e-5)
    dims = [0, 2, 3]
    sum_dy, sum_dy_x = g.sum(dims), (g * x).sum(dims)
    sum_dy_xmu, grad_w = run_node("SyncBatchNormBackwardReduce", [sum_dy, sum_dy_x, mean, invstd],
                                  [(F32, [3]), (F32, [3])])
    want_xmu = (g * (x - mean.reshape(1, 3, 1, 1))).sum(dims)
    assert_close(sum_dy_xmu, want_xmu, "summed")
    assert_close(grad_w, want_xmu * invstd, "summed")

    count = x.numel() // 3
    expand = lambda t: t.reshape(1, 3, 1, 1).expand_as(x).contiguous()  # noqa: E731  (TorchAir expands them)
    (grad_in,) = run_node("SyncBatchNormBackwardElemt",
                          [g, x, expand(mean), expand(invstd), expand(w), expand(sum_dy / count),
                           expand(want_xmu / count)], [(F32, list(x.shape))])
    # the single-device batch-norm input gradient is the same thing
    want = aten.native_batch_norm_backward(g, x, w, None, None, mean, invstd, True, 1e-5, [True, False, False])[0]
    assert_close(grad_in, want, "accumulated")
