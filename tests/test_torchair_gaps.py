"""Where TorchAir lowers wrongly or not at all, what npugraph does instead (docs/npu-faithful-lowering.md):
the view optimisation left off by default, and op_plugin's converters for `aten.eye`,
`aten.clone(memory_format=channels_last)`, `_native_batch_norm_legit.no_stats`, `torch.sym_max/min`,
`aten.index_put` / `_unsafe_index_put` and `convolution_backward` with one-element padding.
Oracle: eager torch; static, and with dynamic=True over three sizes counting dynamo's frames."""
import pytest
import torch
import torch._dynamo.testing
import torch.nn.functional as F

import op_plugin


def _run(fn, inputs_per_call, dynamic, **options):
    """Compiled against eager on each call's inputs; returns the number of graphs compiled."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend(op_plugin.npugraph_backend(**options))
    compiled = torch.compile(fn, backend=counter, dynamic=dynamic)
    for inputs in inputs_per_call:
        expected, actual = fn(*inputs), compiled(*inputs)
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    return counter.frame_count


# --- TorchAir's view optimisation (enable_view_optimize) ------------------------------------------

def _transpose_back_then_reshape(x):
    y = x.transpose(1, 3) + 1          # a result with the transposed input's strides
    return y.transpose(1, 3).reshape(-1, 3) * 2


def test_transpose_of_a_strided_result_then_reshape_matches_eager():
    _run(_transpose_back_then_reshape, [(torch.randn(2, 3, 4, 5),)], dynamic=False)


@pytest.mark.xfail(strict=True, reason=(
    "TorchAir bug: with enable_view_optimize its view chain rebases a non-contiguous result on "
    "contiguous strides, and the reshape's fake output (a contiguous copy) hides the transpose: the GE "
    "graph is Transpose, Add, Reshape, without the second Transpose (wrong numbers, on an NPU too)"))
def test_torchair_view_optimize_keeps_the_transpose():
    _run(_transpose_back_then_reshape, [(torch.randn(2, 3, 4, 5),)], dynamic=False, torchair_view_optimize=True)


def _heads_attention(x):
    """x [batch, length, 4 heads, 8]: heads first, attend, merge (the transposes of every attention)."""
    q = x.transpose(1, 2)
    scores = (q @ q.transpose(-1, -2)).softmax(-1)
    return (scores @ q).transpose(1, 2).flatten(2)


def _lengths_hitting_static_dims():
    """Lengths 4 (the head count), 6, 8 (the head dim); only the length is dynamic, as in a model
    whose head count and dim come from its weights (dynamic=True would duck-size 4 heads with 4)."""
    inputs = [torch.randn(2, n, 4, 8) for n in (4, 6, 8)]
    for x in inputs:
        torch._dynamo.mark_dynamic(x, 1)
    return [(x,) for x in inputs]


def test_length_equal_to_head_count_or_dim_does_not_recompile():
    assert _run(_heads_attention, _lengths_hitting_static_dims(), dynamic=None) == 1


@pytest.mark.xfail(strict=True, reason=(
    "TorchAir bug: its view optimisation compares a view's symbolic sizes with its source's static ones "
    "(continguous.py optimize_view), so length 4 == 4 heads at the first call specialises the length"))
def test_torchair_view_optimize_does_not_recompile():
    assert _run(_heads_attention, _lengths_hitting_static_dims(), dynamic=None, torchair_view_optimize=True) == 1


def test_torchair_view_optimize_option_is_checked():
    with pytest.raises(op_plugin.OpPluginError, match="torchair_view_optimize must be True or False"):
        op_plugin.npugraph_backend(torchair_view_optimize="yes")


# --- aten.eye -------------------------------------------------------------------------------------

def _eyes(x):
    n = x.shape[0]
    return x - 2 * torch.eye(n, dtype=x.dtype), torch.eye(n, 3), torch.eye(n, dtype=torch.int32)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_eye_matches_eager(dynamic):
    frames = _run(_eyes, [(torch.randn(n, n),) for n in (4, 5, 7)], dynamic)
    assert frames == (1 if dynamic else 3)


# --- aten.clone(memory_format=channels_last) ----------------------------------------------------

def _channels_last_then_views(x):
    y = (x + 1).contiguous(memory_format=torch.channels_last)
    return y.permute(0, 2, 3, 1).reshape(-1, x.shape[1]) * 2, y * 3


def _interpolated_table(table):
    """BEiT's relative position table: a permuted view resized with bilinear interpolation."""
    grid = table.reshape(1, 5, 5, -1).permute(0, 3, 1, 2)
    return F.interpolate(grid, size=(7, 7), mode="bilinear").permute(0, 2, 3, 1).reshape(49, -1)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_channels_last_clone_matches_eager(dynamic):
    _run(_channels_last_then_views, [(torch.randn(b, 3, 4, 5),) for b in (2, 3, 4)], dynamic)
    _run(_interpolated_table, [(torch.randn(25, h),) for h in (2, 3, 4)], dynamic)


# --- aten._native_batch_norm_legit.no_stats -----------------------------------------------------

def _standardised_conv(x, w):
    """BiT's weight-standardised convolution: batch norm of the weights, no running statistics."""
    ws = F.batch_norm(w.reshape(1, w.shape[0], -1), None, None, training=True, momentum=0.0, eps=1e-6)
    return F.conv2d(x, ws.reshape_as(w))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_batch_norm_without_running_stats_matches_eager(dynamic):
    _run(_standardised_conv, [(torch.randn(b, 3, 8, 8), torch.randn(4, 3, 3, 3)) for b in (2, 3, 4)], dynamic)


def test_batch_norm_without_running_stats_gradient_matches_eager():
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3, requires_grad=True)
    torch._dynamo.reset()
    torch.compile(_standardised_conv, backend="npugraph")(x, w).square().sum().backward()
    compiled_grad, w.grad = w.grad, None
    _standardised_conv(x, w).square().sum().backward()
    torch.testing.assert_close(compiled_grad, w.grad, atol=1e-4, rtol=1e-4)


# --- torch.sym_max / torch.sym_min --------------------------------------------------------------

def _last_window(x):
    """Sliding-window attention's cache slice: start = max(0, length - window), end = min(length, 6)."""
    n = x.shape[1]
    start, end = max(0, n - 4), min(n, 6)
    return x[:, start:] * 2, x[:, :end] + 1


def test_sym_max_and_min_on_sizes_match_eager_without_recompiling():
    frames = _run(_last_window, [(torch.randn(2, n),) for n in (7, 9, 11)], dynamic=True)
    assert frames == 1


# --- aten.index_put (TorchAir has no converter): x[idx] = v, and every x[idx]'s backward --------

def _index_put(accumulate, leading):
    def fn(x, index, values):
        return torch.ops.aten.index_put(x, [None] * leading + [index], values, accumulate)
    return fn


@pytest.mark.parametrize("accumulate", [True, False])
@pytest.mark.parametrize("dynamic", [False, True])
def test_index_put_on_dim_0_matches_eager(accumulate, dynamic):
    # repeated and negative indices: accumulated (or, without accumulate, written once each here)
    index = torch.tensor([[0, -1], [2, 0]]) if accumulate else torch.tensor([[0, -1], [2, 3]])
    calls = [(torch.randn(n, 5, 3), index, torch.randn(2, 2, 5, 3)) for n in (6, 8, 10)]
    _run(_index_put(accumulate, 0), calls if dynamic else calls[:1], dynamic=dynamic)


def test_index_put_after_a_slice_broadcasts_its_values():
    calls = [(torch.randn(4, n, 3), torch.tensor([4, 1, 0]), torch.randn(3, 1)) for n in (6, 8, 10)]
    _run(_index_put(False, 1), calls, dynamic=True)
    _run(_index_put(True, 1), calls, dynamic=True)


def test_setitem_with_an_index_tensor_matches_eager():
    def fn(x, index):
        y = x.clone()
        y[:, index] = 0.5
        return y
    _run(fn, [(torch.randn(4, 6), torch.tensor([4, 1]))], dynamic=False)


def test_gathered_table_gradient_matches_eager():
    """BEiT/Swin's relative position bias: table[index] in the forward, index_put(accumulate) in the backward."""
    torch.manual_seed(0)
    index = torch.randint(0, 10, (7, 7))

    def bias(table):
        return table[index.view(-1)].view(7, 7, -1).permute(2, 0, 1)

    table = torch.randn(10, 4, requires_grad=True)
    torch._dynamo.reset()
    torch.compile(bias, backend="npugraph")(table).square().sum().backward()
    compiled_grad, table.grad = table.grad, None
    bias(table).square().sum().backward()
    torch.testing.assert_close(compiled_grad, table.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("accumulate", [True, False])
def test_index_put_on_adjacent_dims_broadcasts_its_indices(accumulate):
    def fn(x, i, j, values):
        return torch.ops.aten.index_put(x, [None, i, j], values, accumulate)
    rows, cols = (torch.tensor([[0], [4], [-1]]), torch.tensor([1, 5, 5, 0])) if accumulate else \
        (torch.tensor([0, 4, 2]), torch.tensor([1, 5, 3]))
    calls = [(torch.randn(n, 5, 6, 2), rows, cols, torch.randn(2)) for n in (3, 4, 5)]
    _run(fn, calls, dynamic=True)


def test_bilinear_interpolation_gradient_matches_eager():
    """Its backward decomposes to _unsafe_index_put on two adjacent dims (BEiT's position embedding)."""
    x = torch.randn(2, 3, 5, 5, requires_grad=True)

    def up(x):
        return F.interpolate(x, size=(8, 8), mode="bilinear", align_corners=False)

    torch._dynamo.reset()
    torch.compile(up, backend="npugraph")(x).square().sum().backward()
    compiled_grad, x.grad = x.grad, None
    up(x).square().sum().backward()
    torch.testing.assert_close(compiled_grad, x.grad, atol=1e-5, rtol=1e-5)


def test_index_put_on_dims_apart_is_a_clear_error():
    fn = torch.compile(lambda x, i, j, v: torch.ops.aten.index_put(x, [i, None, j], v), backend="npugraph")
    with pytest.raises(Exception, match="aten.index_put: op_plugin lowers integer index tensors on adjacent dims"):
        fn(torch.randn(4, 4, 4), torch.tensor([0, 1]), torch.tensor([1, 2]), torch.randn(2, 4))


# --- aten.convolution_backward with a one-element padding (padding="valid") ----------------------

def test_depthwise_valid_conv_gradients_match_eager():
    """EfficientNet's depthwise convs (padding="valid", stride 2): aten passes padding=[0], which ATen
    expands per spatial dim and TorchAir's converter indexes as [0], [1]."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(8, 8, 5, stride=2, padding="valid", groups=8, bias=False)
    x = torch.randn(2, 8, 11, 11, requires_grad=True)
    torch._dynamo.reset()
    torch.compile(conv, backend="npugraph")(x).square().sum().backward()
    grads = x.grad, conv.weight.grad
    x.grad, conv.weight.grad = None, None
    conv(x).square().sum().backward()
    torch.testing.assert_close(grads, (x.grad, conv.weight.grad), atol=1e-4, rtol=1e-4)
