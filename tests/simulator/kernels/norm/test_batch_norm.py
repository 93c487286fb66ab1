"""Tests of kernels/norm/batch_norm.py: BatchNormV3, BNInfer, the BN*Grad ops, SyncBatchNorm*.
"""
from __future__ import annotations

import pytest
import torch

import op_plugin  # noqa: F401
from op_plugin._simulator import GeExecutionError
from op_plugin._simulator.interpreter.kernels.norm import batch_norm as norm_batch
from op_plugin._testing_harness import assert_close, Npugraph, run_node

from tests.simulator.kernels.helpers import _IDS, _r, aten, check_grad_case, F16, F32, TinyCnn


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


def test_batch_norm_training_updates_the_running_stats_as_eager_does():
    """TorchAir's converter hands BatchNormV3's outputs back in GE order; op_plugin's correction
    restores aten's, so the buffers get the momentum-updated running stats, not the batch stats."""
    torch.manual_seed(0)
    eager, compiled_model = TinyCnn(), TinyCnn()
    compiled_model.load_state_dict(eager.state_dict())
    x = torch.randn(4, 3, 8, 8)
    eager(x)
    Npugraph(compiled_model, fullgraph=False)(x)
    assert_close(compiled_model.bn.running_mean, eager.bn.running_mean, "kernel")
    assert_close(compiled_model.bn.running_var, eager.bn.running_var, "kernel")
    assert int(compiled_model.bn.num_batches_tracked) == 1


def test_compiled_batch_norm_training_matches_eager_y_and_running_stats():
    """TorchAir's _native_batch_norm_legit_functional converter returns BatchNormV3's outputs in GE order
    (y, running_mean, running_var, save_mean, save_rstd); npugraph's correction hands them back in
    aten's (y, save_mean, save_invstd, running_mean, running_var); off arch35 CANN's save_rstd holds
    the variance. Both checked."""
    x, w, b, rm, rv = _r(4, 3, 2, 5), _r(3), _r(3), _r(3), torch.rand(3) + 0.5
    fn = lambda *a: aten._native_batch_norm_legit_functional(*a, True, 0.1, 1e-5)  # noqa: E731
    y, save_mean, save_var, new_mean, new_var = Npugraph(fn)(x, w, b, rm, rv)
    e_y, e_save_mean, e_save_invstd, e_mean, e_var = fn(x, w, b, rm, rv)
    assert_close(y, e_y, "reduction")
    assert_close(new_mean, e_mean, "reduction")
    assert_close(new_var, e_var, "reduction")
    assert_close(save_mean, e_save_mean, "reduction")
    assert_close(torch.rsqrt(save_var + 1e-5), e_save_invstd, "reduction")


# ---- one-node graphs: attribute values TorchAir never sets ---------------------------------------

@pytest.mark.parametrize("layout, dims", [("NCHW", 4), ("NCDHW", 5), ("NHWC", 4)])
def test_batch_norm_v3_training(layout, dims):
    x = _r(*([3, 4, 5, 2, 3][:dims]))
    channel = x.dim() - 1 if layout == "NHWC" else 1
    c = x.shape[channel]
    w, b, rm, rv = _r(c), _r(c), _r(c), torch.rand(c) + 0.5
    e_rm, e_rv = rm.clone(), rv.clone()
    y, new_mean, new_var, save_mean, save_rstd = run_node("BatchNormV3", [x, w, b, rm, rv], layouts=[layout],
                                                          epsilon=1e-3, momentum=0.3, is_training=True)
    # running_mean/var are ref outputs the graph returns: the caller's rm, rv stay as they were (the
    # functional op's result is the output, as eager's functional batch norm leaves its inputs alone)
    assert torch.equal(rm, e_rm) and torch.equal(rv, e_rv)
    moved = x.movedim(channel, 1)
    e_y = torch.nn.functional.batch_norm(moved, e_rm, e_rv, w, b, training=True, momentum=0.3, eps=1e-3)
    assert_close(y, e_y.movedim(1, channel), "reduction")
    assert_close(new_mean, e_rm, "reduction")
    assert_close(new_var, e_rv, "reduction")
    dims_ = [d for d in range(x.dim()) if d != channel]
    assert_close(save_mean, x.mean(dims_), "reduction")
    assert norm_batch.SAVE_RSTD_HOLDS_VARIANCE
    assert_close(save_rstd, x.var(dims_, unbiased=False), "reduction")


def test_batch_norm_v3_inference_uses_running_stats():
    x, w, b, rm, rv = _r(2, 3, 4, 4, dtype=F16), _r(3), _r(3), _r(3), torch.rand(3) + 0.5
    y, new_mean, new_var, _, _ = run_node("BatchNormV3", [x, w, b, rm, rv], layouts=["NCHW"], epsilon=1e-5,
                                          momentum=0.1, is_training=False)
    e_y = torch.nn.functional.batch_norm(x.float(), rm, rv, w, b, training=False, eps=1e-5)
    assert y.dtype == F16
    assert_close(y, e_y.half(), "reduction")
    assert torch.equal(new_mean, rm) and torch.equal(new_var, rv)
    with pytest.raises(GeExecutionError, match="layout"):
        run_node("BatchNormV3", [x, w, b, rm, rv], layouts=["NC1HWC0"], is_training=False)
