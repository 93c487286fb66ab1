"""Issue 27: padding by reflection/replication, pixel (un)shuffle and 1-D interpolation with
dynamic=True, through npugraph against eager (op_plugin's converters in
op_plugin/_lowering/vision_converters.py and the scalar_tensor completion in aten_completions.py).

Oracle: the same torch code run eagerly; static, and dynamic over two sizes through one graph;
training through the backward ops (PadV3Grad; pixel_shuffle's gradient is pixel_unshuffle)."""
import pytest
import torch
import torch.nn.functional as F

from op_plugin._testing_harness import check_compiled, check_dynamic_sizes

PADS = {
    "reflect1d_batched": (lambda x: F.pad(x, (2, 3), mode="reflect"), (2, 3, 8), "PadV3"),
    "reflect1d_unbatched": (lambda x: F.pad(x, (3, 1), mode="reflect"), (3, 8), "PadV3"),
    "reflect3d": (lambda x: F.pad(x, (1, 2, 0, 1, 2, 1), mode="reflect"), (1, 2, 3, 4, 5), "PadV3"),
    "replicate2d": (lambda x: F.pad(x, (1, 2, 0, 3), mode="replicate"), (2, 3, 4, 5), "PadV3"),
    "replicate3d": (lambda x: F.pad(x, (1, 0, 2, 1, 0, 1), mode="replicate"), (1, 2, 3, 4, 5), "PadV3"),
}
SHUFFLES = {
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), (2, 8, 3, 5)),
    "pixel_shuffle_3d_input": (lambda x: F.pixel_shuffle(x, 3), (9, 2, 4)),
    "pixel_shuffle_5d_input": (lambda x: F.pixel_shuffle(x, 2), (3, 1, 4, 5, 6)),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), (2, 2, 6, 4)),
    "pixel_unshuffle_5d_input": (lambda x: F.pixel_unshuffle(x, 3), (4, 1, 2, 6, 9)),
}


def _grown(shape, by):
    """`shape` with its last two dims (one for a 1-D pad) grown by `by`, keeping divisibility by `by`."""
    return (*shape[:-2], shape[-2] + by, shape[-1] + by) if len(shape) > 2 else (shape[0], shape[1] + by)


@pytest.mark.parametrize("name", sorted(PADS))
def test_pad_static(name):
    fn, shape, ge_type = PADS[name]
    check_compiled(fn, (torch.randn(shape),), ge_type)


@pytest.mark.parametrize("name", sorted(PADS))
def test_pad_dynamic(name):
    fn, shape, _ = PADS[name]
    check_dynamic_sizes(fn, [(torch.randn(shape),), (torch.randn(_grown(shape, 2)),)])


@pytest.mark.parametrize("name", sorted(SHUFFLES))
def test_pixel_shuffle_static(name):
    fn, shape = SHUFFLES[name]
    check_compiled(fn, (torch.randn(shape),), "Transpose")


@pytest.mark.parametrize("name", sorted(SHUFFLES))
def test_pixel_shuffle_dynamic(name):
    fn, shape = SHUFFLES[name]
    factor = 3 if "3d_input" in name or name == "pixel_unshuffle_5d_input" else 2
    check_dynamic_sizes(fn, [(torch.randn(shape),), (torch.randn(_grown(shape, factor)),)])


def _train_step(fn, x, dynamic):
    """(output, x.grad) of fn compiled with npugraph, and of fn in eager, for one cotangent."""
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="npugraph", dynamic=dynamic, fullgraph=True)
    results = []
    for run in (compiled, fn):
        leaf = x.detach().clone().requires_grad_()
        out = run(leaf)
        torch.manual_seed(0)
        out.backward(torch.randn_like(out))
        results.append((out.detach(), leaf.grad))
    return results


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name", ["reflect1d_batched", "reflect3d", "replicate2d", "replicate3d"])
def test_pad_training_matches_eager(name, dynamic):
    fn, shape, _ = PADS[name]
    (got, got_grad), (want, want_grad) = _train_step(fn, torch.randn(shape), dynamic)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name", ["pixel_shuffle", "pixel_unshuffle"])
def test_pixel_shuffle_training_matches_eager(name, dynamic):
    fn, shape = SHUFFLES[name]
    (got, got_grad), (want, want_grad) = _train_step(fn, torch.randn(shape), dynamic)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)


INTERPOLATIONS = {
    "nearest1d": lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
    "linear1d_align_corners": lambda x: F.interpolate(x, scale_factor=2, mode="linear", align_corners=True),
    "linear1d": lambda x: F.interpolate(x, scale_factor=1.5, mode="linear"),
    "nearest1d_size": lambda x: F.interpolate(x, size=13, mode="nearest"),
    "nearest2d": lambda x: F.interpolate(x.unsqueeze(1), scale_factor=2, mode="nearest"),
}


@pytest.mark.parametrize("name", sorted(INTERPOLATIONS))
def test_interpolate_1d_static(name):
    check_compiled(INTERPOLATIONS[name], (torch.randn(2, 3, 8),))


@pytest.mark.parametrize("name", sorted(INTERPOLATIONS))
def test_interpolate_1d_dynamic(name):
    """With dynamic=True the scale is computed from the symbolic length in float: a
    `scalar_tensor(length)` TorchAir left as the int64 size (labelled float32) before the completion."""
    check_dynamic_sizes(INTERPOLATIONS[name], [(torch.randn(2, 3, 8),), (torch.randn(2, 3, 11),)])


def _scaled_by_length(x):
    # scalar_tensor without a dtype is float32 in aten, whether given a Python int or a (symbolic) size
    return x / torch.scalar_tensor(x.shape[-1]) + torch.scalar_tensor(3)


def test_scalar_tensor_of_an_int_is_float32_static():
    check_compiled(_scaled_by_length, (torch.randn(2, 5),))


def test_scalar_tensor_of_a_symbolic_size_is_float32():
    check_dynamic_sizes(_scaled_by_length, [(torch.randn(2, 5),), (torch.randn(3, 7),)])


@pytest.mark.parametrize("beta, threshold", [(1.0, 20.0), (2.0, 3.0), (0.5, 1.0)])
def test_softplus_v2_grad_kernel_matches_torchs_softplus_backward(beta, threshold):
    """The GE kernel behind aten.softplus_backward (Mamba training), against the aten op eager runs."""
    from op_plugin._testing_harness import assert_close, run_node

    x, grad = torch.randn(6, 7) * 8, torch.randn(6, 7)
    (got,) = run_node("SoftplusV2Grad", [grad, x], [(torch.float32, [6, 7])], beta=beta, threshold=threshold)
    assert_close(got, torch.ops.aten.softplus_backward(grad, x, beta, threshold), "kernel")


def test_strided_slice_backward_with_dynamic_sizes():
    """Strided slices in training with dynamic=True: slice_backward gets symbolic sizes with end
    INT64_MAX (TorchAir cast it to int32) or negative bounds (TorchAir did not wrap them): op_plugin's
    slice_backward completion. Mamba's selective scan slices `x[:-1:2]`."""
    def step(x):
        return ((x[:, 1::2] * 3).sin().sum() + x[:, :-1:2].cos().sum() + (x[:, -6:-1:3] * x[:, -6:-1:3]).sum()
                + x[:, 20::2].sum())

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="npugraph", dynamic=True)
    for shape in ((3, 8), (5, 11)):
        x = torch.randn(shape, requires_grad=True)
        compiled(x).backward()
        got, x.grad = x.grad, None
        step(x).backward()
        torch.testing.assert_close(got, x.grad)


CORE = {  # op_plugin/_lowering/core_converters.py: core-ATen ops TorchAir does not lower
    "amin": lambda x: x.amin(1) + x.amin(),
    "min_dim": lambda x: x.min(1).values * 2 + x.min(1).indices,
    "min_all": lambda x: x - x.min(),
    "any_all": lambda x: (x > 0).any(dim=(0,)).float().sum() + (x > -1).all(1).float().sum() + (x > 0).all(),
    "prod": lambda x: x.prod(1, keepdim=True) + x.prod(),
    "isnan": lambda x: torch.isnan(x.log()).float() + torch.isnan(x.int()).float(),
    "squeeze_dims": lambda x: x.unsqueeze(0).unsqueeze(2).squeeze((0, 2)) * 2,
    "clamp_one_side": lambda x: x.clamp(max=0.3) + torch.clamp_min(x, x.mean(0)) + torch.clamp_max(x, x.flip(0)),
    "atan2": lambda x: torch.atan2(x, x.flip(0)),
    "logical_xor": lambda x: torch.logical_xor(x > 0, x.flip(1) > 0).float(),
    "var": lambda x: x.var(1) + x.var(0, correction=0, keepdim=True).sum() + x.var(),
    "var_mean": lambda x: torch.var_mean(x, 1, keepdim=True)[0] * torch.var_mean(x, 1, keepdim=True)[1],
    "roll": lambda x: torch.roll(x, (1, -3), (0, 1)) + torch.roll(x, 7),
}


CORE_GE_TYPES = {"amin": "ReduceMin", "min_dim": "ArgMinWithValue", "min_all": "ReduceMin", "any_all": "ReduceAll",
                 "prod": "ReduceProd", "isnan": "IsNan", "squeeze_dims": "Squeeze", "atan2": "Atan2",
                 "logical_xor": "NotEqual", "clamp_one_side": "ClipByValueV2", "var": "SquaredDifference",
                 "var_mean": "SquaredDifference", "roll": "GatherV2"}


@pytest.mark.parametrize("name", sorted(CORE))
def test_core_op_static(name):
    check_compiled(CORE[name], (torch.randn(4, 5),), CORE_GE_TYPES[name])


@pytest.mark.parametrize("name", sorted(CORE))
def test_core_op_dynamic(name):
    check_dynamic_sizes(CORE[name], [(torch.randn(4, 5),), (torch.randn(6, 7),)])
