"""PrivateUse1 kernels for the aten ops torch's generic kernels send only to device backends.

Some of torch's generic (CompositeExplicit) kernels route a tensor that is neither CPU nor CUDA to an op
that only device backends implement. The CPU kernel set lacks these ops, so the boxed fallback cannot run
them (or, where torch registers a throwing CompositeExplicitAutograd stub, never sees them):

- `aten::convolution` (ATen/native/Convolution.cpp, `_select_conv_backend`): a backend torch does not
  know is `ConvBackend::Overrideable`, so `_convolution` calls `convolution_overrideable` and
  `convolution_backward` calls `convolution_backward_overrideable` (both CompositeExplicitAutograd stubs
  raising "convolution_overrideable not implemented"). Every conv1d/2d/3d and conv_transpose reaches them,
  1d ones already viewed as 2d.
- dtypes a device kernel takes and the CPU kernel refuses: `aten::histc` on integers (aclnnHistc and CUDA
  take them; transformers' MoE layers count tokens per expert with an int32 histc off CPU).
- `LSTMCell`/`GRUCell` of ATen/native/RNN.cpp (used by `nn.LSTM`, `nn.GRU`, `nn.LSTMCell`, `nn.GRUCell`,
  packed sequences included): for `is_cuda() || is_xpu() || is_privateuseone()` inputs they call the fused
  cell ops `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell`, whose autograd formulas (derivatives.yaml)
  call `_thnn_fused_lstm_cell_backward_impl` / `_thnn_fused_gru_cell_backward` with the forward's
  workspace. Only CUDA (ATen/native/cuda/RNN.cu) implements them.

Each kernel computes what the device op computes, on CPU views of the npu tensors' memory
(`fallback.run_adapter`), results handed back as npu tensors: the convolution ops run the CPU reference
`aten.convolution` / `aten.convolution_backward` (so conv on npu tensors equals conv on CPU tensors bit for
bit); the fused cells follow RNN.cu's kernels: gates summed and activated in the accumulate type (float
for 16-bit inputs), results and workspace stored in the input dtype, workspace layouts as RNN.cu's (LSTM
`[i, f, c, o]` gate activations, (B, 4H); GRU `[r, i, n, hx, hn + b_hn]`, (B, 5H)), which the backward
reads.

Not covered: `_scaled_dot_product_fused_attention_overrideable` (and its backward). torch's generic
`scaled_dot_product_attention` picks it only when a backend registers `_fused_sdp_choice_stub` for
PrivateUse1; the virtual NPU registers none, so SDPA takes the math path, made of ops the fallback runs.
"""
from __future__ import annotations

import torch

from . import fallback
from .ge_eager import DECLINE  # an adapter's answer for inputs it leaves to the CPU kernel

_LIBRARY = None


def install() -> None:
    """Register a PrivateUse1 kernel for each op of `KERNELS` (once per process)."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    _LIBRARY = torch.library.Library("aten", "IMPL")  # kept for the process
    for name, adapter in KERNELS.items():
        op = getattr(torch.ops.aten, name).default

        def kernel(*args, _op=op, _adapter=adapter, **kwargs):
            return fallback.run_adapter(_adapter, _op, args, kwargs)

        _LIBRARY.impl(name, kernel, "PrivateUse1")


# -- convolution: the CPU reference kernels ---------------------------------------------------------------

def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return torch.ops.aten.convolution.default(input, weight, bias, stride, padding, dilation, transposed,
                                              output_padding, groups)


def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
                                      output_padding, groups, output_mask):
    # The bias gradient is grad_output summed over all but the channel dim; aten.convolution_backward
    # computes it when given the bias' size (out_channels; a transposed weight is (in, out / groups, ...)).
    # Outputs outside output_mask are undefined (None), as a device kernel gives them: the CPU kernel's oneDNN
    # backend computes the weight grad along with the bias grad even when only the bias grad is asked for.
    bias_sizes = [weight.size(1) * groups if transposed else weight.size(0)] if output_mask[2] else None
    grads = torch.ops.aten.convolution_backward.default(grad_output, input, weight, bias_sizes, stride, padding,
                                                        dilation, transposed, output_padding, groups, output_mask)
    return tuple(grad if wanted else None for grad, wanted in zip(grads, output_mask, strict=True))


# -- fused RNN cells: the math of ATen/native/cuda/RNN.cu --------------------------------------------------

def _acc_type(dtype: torch.dtype) -> torch.dtype:
    """`acc_type<scalar_t, /*is_cuda=*/true>`: float for 16-bit floats, else the type itself."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _check_cell(name: str, input_gates, hidden_gates, input_bias, hidden_bias, prev, factor: int) -> None:
    """RNN.cu's `checkSizes`, and one dtype for all (its kernels read every tensor as the gates' type)."""
    if input_gates.dim() != 2 or input_gates.shape != hidden_gates.shape:
        raise RuntimeError(f"{name}: expected 2-D input_gates and hidden_gates of the same size, got "
                           f"{tuple(input_gates.shape)} and {tuple(hidden_gates.shape)}")
    gates = input_gates.size(1)
    if input_bias is not None and (hidden_bias is None or input_bias.dim() != 1 or input_bias.numel() != gates
                                   or hidden_bias.shape != input_bias.shape):
        raise RuntimeError(f"{name}: expected 1-D input_bias and hidden_bias of {gates} elements")
    if prev.dim() != 2 or prev.numel() != input_gates.size(0) * gates // factor:
        raise RuntimeError(f"{name}: expected a 2-D previous state of {input_gates.size(0)} x {gates // factor}, "
                           f"got {tuple(prev.shape)}")
    tensors = [t for t in (input_gates, hidden_gates, input_bias, hidden_bias, prev) if t is not None]
    if any(t.dtype != input_gates.dtype for t in tensors):
        raise RuntimeError(f"{name}: expected all tensors of dtype {input_gates.dtype}, got "
                           f"{[t.dtype for t in tensors]}")


def _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """-> (hy, cy, workspace): RNN.cu `lstm_cell_forward`; workspace = [i, f, c, o] activated gates."""
    _check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, input_bias, hidden_bias, cx, 4)
    dtype, acc = input_gates.dtype, _acc_type(input_gates.dtype)
    gates = input_gates.to(acc) + hidden_gates.to(acc)
    if input_bias is not None:
        gates = gates + input_bias.to(acc) + hidden_bias.to(acc)
    i, f, c, o = gates.chunk(4, 1)
    ig, fg, cg, og = i.sigmoid(), f.sigmoid(), c.tanh(), o.sigmoid()
    cy = fg * cx.to(acc) + ig * cg
    hy = og * cy.tanh()
    workspace = torch.cat([ig, fg, cg, og], 1)
    return hy.to(dtype), cy.to(dtype), workspace.to(dtype)


def _thnn_fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    """-> (grad_gates, grad_cx, grad_bias): RNN.cu `lstm_cell_backward` over the forward's workspace."""
    if grad_hy is None and grad_cy is None:
        return None, None, None
    defined = grad_hy if grad_hy is not None else grad_cy
    if (defined.dim() != 2 or any(t is not None and t.shape != defined.shape for t in (grad_hy, grad_cy, cx, cy))
            or workspace.dim() != 2 or workspace.numel() != defined.numel() * 4):
        raise RuntimeError("fused_lstm_cell_backward: expected grads, cx and cy of one 2-D size and a "
                           "workspace of 4x its elements")
    dtype, acc = workspace.dtype, _acc_type(workspace.dtype)
    ig, fg, cg, og = workspace.to(acc).chunk(4, 1)
    tanh_cy = cy.to(acc).tanh()
    go = grad_hy.to(acc) if grad_hy is not None else torch.zeros_like(tanh_cy)
    goc = grad_cy.to(acc) if grad_cy is not None else torch.zeros_like(tanh_cy)
    gog = go * tanh_cy
    gcx = go * og * (1 - tanh_cy * tanh_cy) + goc
    gig = gcx * cg
    gfg = gcx * cx.to(acc)
    gcg = gcx * ig
    gcx = gcx * fg
    gig = gig * (1 - ig) * ig
    gfg = gfg * (1 - fg) * fg
    gcg = gcg * (1 - cg * cg)
    gog = gog * (1 - og) * og
    grad_gates = torch.cat([gig, gfg, gcg, gog], 1).to(dtype)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, gcx.to(dtype), grad_bias


_GRU_WORKSPACE_MULTIPLIER = 5


def _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """-> (hy, workspace): RNN.cu `gru_cell_forward`; workspace = [r, i, n, hx, hn + b_hn]."""
    _check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, input_bias, hidden_bias, hx, 3)
    dtype, acc = input_gates.dtype, _acc_type(input_gates.dtype)
    ir, ii, in_ = input_gates.to(acc).chunk(3, 1)
    hr, hi, hn = hidden_gates.to(acc).chunk(3, 1)
    r, i, n = ir + hr, ii + hi, in_
    if input_bias is not None:
        b1r, b1i, b1n = input_bias.to(acc).chunk(3)
        b2r, b2i, b2n = hidden_bias.to(acc).chunk(3)
        r, i, n, hn = r + b1r + b2r, i + b1i + b2i, n + b1n, hn + b2n
    rg, ig = r.sigmoid(), i.sigmoid()
    ng = (n + rg * hn).tanh()
    hx_acc = hx.to(acc)
    hy = ng + ig * (hx_acc - ng)
    workspace = torch.cat([rg, ig, ng, hx_acc, hn], 1)
    return hy.to(dtype), workspace.to(dtype)


def _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias):
    """-> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias):
    RNN.cu `gru_cell_backward` over the forward's workspace."""
    if grad_hy.dim() != 2 or tuple(workspace.shape) != (grad_hy.size(0), grad_hy.size(1) * _GRU_WORKSPACE_MULTIPLIER):
        raise RuntimeError(f"fused_gru_cell_backward: expected a 2-D grad_hy and a workspace of "
                           f"{_GRU_WORKSPACE_MULTIPLIER}x its columns, got {tuple(grad_hy.shape)} and "
                           f"{tuple(workspace.shape)}")
    dtype, acc = workspace.dtype, _acc_type(workspace.dtype)
    rg, ig, ng, hx, hn = workspace.to(acc).chunk(_GRU_WORKSPACE_MULTIPLIER, 1)
    go = grad_hy.to(acc)
    gig = go * (hx - ng) * (1 - ig) * ig
    ghx = go * ig
    gin = go * (1 - ig) * (1 - ng * ng)
    ghn = gin * rg
    grg = gin * hn * (1 - rg) * rg
    grad_input_gates = torch.cat([grg, gig, gin], 1).to(dtype)
    grad_hidden_gates = torch.cat([grg, gig, ghn], 1).to(dtype)
    if has_bias:
        return (grad_input_gates, grad_hidden_gates, ghx.to(dtype), grad_input_gates.sum(0),
                grad_hidden_gates.sum(0))
    return grad_input_gates, grad_hidden_gates, ghx.to(dtype), None, None


# aten op (default overload) -> its kernel on CPU views.
# -- dtypes the device kernel takes and the CPU kernel does not --------------------------------------------

_HISTC_INTEGERS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def histc(input, bins=100, min=0, max=0):
    """torch_npu's histc is aclnnHistc, which takes INT8/UINT8/INT16/INT32/INT64 as well as FLOAT16/FLOAT32
    (hicann/ops-math math/histogram_v2/docs/aclnnHistc.md), as CUDA's does; CPU's refuses integers
    ("histogram_cpu" not implemented for 'Int'), and transformers' MoE (integrations/moe.py) passes int32 on
    any device but cpu and mps. Integers are counted as float64 values (exact below 2**53) and the counts
    returned in the input's dtype; floating inputs run the CPU kernel."""
    if input.dtype not in _HISTC_INTEGERS:
        return DECLINE
    return torch.histc(input.double(), bins=bins, min=min, max=max).to(input.dtype)


KERNELS = {
    "histc": histc,
    "convolution_overrideable": convolution_overrideable,
    "convolution_backward_overrideable": convolution_backward_overrideable,
    "_thnn_fused_lstm_cell": _thnn_fused_lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": _thnn_fused_lstm_cell_backward_impl,
    "_thnn_fused_gru_cell": _thnn_fused_gru_cell,
    "_thnn_fused_gru_cell_backward": _thnn_fused_gru_cell_backward,
}
