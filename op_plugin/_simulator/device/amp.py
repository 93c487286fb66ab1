"""Mixed precision on the virtual NPU: `torch.autocast("npu")` and `torch.npu.amp` (docs/virtual-npu.md).

torch runs autocast for a PrivateUse1 backend through the `AutocastPrivateUse1` dispatch key, enabled while an
`autocast("npu")` block is active, but registers no kernel for it (torch 2.13: not even a fallthrough, so every
op on npu tensors inside the block would fail). torch_npu registers them in C++ (Ascend/pytorch
`torch_npu/csrc/aten/AutoCastOps.cpp`): a fallthrough for every op, and per-op kernels with at::autocast's
policies. `install()` registers the same from Python: the fallthrough, and for each op of the tables below
(copied from that file) a kernel that casts the npu floating-point arguments as its policy says and runs the op
again below the autocast key, as at::autocast::WrapFunction does:

- lower_precision_fp (matmuls, convolutions, linear, ...): to the autocast dtype, float16 by default
  (`torch.get_autocast_dtype("npu")`, as torch_npu's `torch.npu.amp.autocast(dtype=torch.float16)`);
- fp32 (exp, log, layer_norm, the losses, ...): to float32;
- fp32_set_opt_dtype (softmax, log_softmax, sum, cumsum, ...): dtype=float32 when the caller gave none and the
  first argument is an npu floating-point tensor;
- fp32_append_dtype (norm): the dtype overload with float32;
- promote (addcmul, index_put, ...): all to the widest floating dtype among them;
- binary_cross_entropy: refused, with torch_npu's message.

Eligible, as in at::autocast: floating-point tensors on npu, float64 excepted. Not emulated: the cast cache
(`cache_enabled`: a float32 leaf weight is cast again at each use; the values are the same).

`torch.npu` gets torch_npu's `get_amp_supported_dtype` (which `torch.autocast` requires of a backend's module),
`is_autocast_enabled`, `set_autocast_enabled`, `get_autocast_dtype`, `set_autocast_dtype` (torch_npu
`npu/autocast_utils.py`), and this module as `torch.npu.amp` (also importable as `torch.npu.amp`, as torch_npu's
`torch_npu.npu.amp`): `autocast`, `GradScaler`, `custom_fwd`, `custom_bwd` (`npu/amp/autocast_mode.py`,
`npu/amp/grad_scaler.py` of the wheel). GradScaler's kernels (`_amp_foreach_non_finite_check_and_unscale_`,
`_amp_update_scale_`) run as every op does, on the CPU kernels.
"""
from __future__ import annotations

import functools
import sys
from collections import defaultdict

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]  # torch_npu.npu.amp's names

DEVICE = "npu"
_KEY = "AutocastPrivateUse1"
_LIBRARIES: list[torch.library.Library] = []  # kept for the process: dropping them unregisters

# Ascend/pytorch torch_npu/csrc/aten/AutoCastOps.cpp, policy by policy ("name.overload"; no overload: default).
LOWER_PRECISION_FP = (
    "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d.input", "conv_transpose3d.input", "convolution", "cudnn_convolution",
    "cudnn_convolution_transpose", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linear",
    "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
    "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention",
)
FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt", "sinh",
    "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar", "softplus", "layer_norm", "native_layer_norm",
    "group_norm", "frobenius_norm.dim", "nuclear_norm", "nuclear_norm.dim", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss",
    "huber_loss", "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist",
    "renorm", "logsumexp",
)
FP32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum", "linalg_vector_norm",
    "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum", "sum.dim_IntList",
)
FP32_APPEND_DTYPE = {"norm.Scalar": "norm.ScalarOpt_dtype", "norm.ScalarOpt_dim": "norm.ScalarOpt_dim_dtype"}
PROMOTE = (
    "addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "grid_sampler", "index_put", "tensordot",
    "scatter_add",
)
BANNED = {"binary_cross_entropy": (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")}


# ---- the policies -----------------------------------------------------------------------------------

def _overload(name: str) -> torch._ops.OpOverload:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _eligible(value) -> bool:
    """at::autocast's is_eligible: a floating-point npu tensor, float64 excepted."""
    return (isinstance(value, torch.Tensor) and value.is_floating_point() and value.device.type == DEVICE
            and value.dtype != torch.float64)


def _cast(tree, dtype: torch.dtype):
    return tree_map(lambda value: value.to(dtype) if _eligible(value) else value, tree)


def _below_autocast():
    """Runs the op again with the autocast key excluded, as WrapFunction's ExcludeDispatchKeyGuard."""
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1))


def _lower_precision_fp(op, *args, **kwargs):
    with _below_autocast():
        args, kwargs = _cast((args, kwargs), torch.get_autocast_dtype(DEVICE))
        return op(*args, **kwargs)


def _fp32(op, *args, **kwargs):
    with _below_autocast():
        args, kwargs = _cast((args, kwargs), torch.float32)
        return op(*args, **kwargs)


def _with_float_dtype(op, args, kwargs):
    """args/kwargs with the op's `dtype` argument set to float32 where the caller left it None."""
    index = next(i for i, argument in enumerate(op._schema.arguments) if argument.name == "dtype")
    if index < len(args):
        if args[index] is None:
            args = (*args[:index], torch.float32, *args[index + 1:])
    elif kwargs.get("dtype") is None:
        kwargs = {**kwargs, "dtype": torch.float32}
    return args, kwargs


def _fp32_set_opt_dtype(op, *args, **kwargs):
    with _below_autocast():
        if args and _eligible(args[0]):
            args, kwargs = _with_float_dtype(op, args, kwargs)
        return op(*args, **kwargs)


def _all_arguments(op, args, kwargs) -> list:
    """The op's arguments in schema order, defaults filled in."""
    values = list(args)
    for argument in op._schema.arguments[len(args):]:
        values.append(kwargs[argument.name] if argument.name in kwargs else argument.default_value)
    return values


def _fp32_append_dtype(op, target, *args, **kwargs):
    """norm without a dtype -> the dtype overload, float32 for an eligible input (else the input's dtype)."""
    with _below_autocast():
        values = _all_arguments(op, args, kwargs)
        dtype = torch.float32 if _eligible(values[0]) else values[0].dtype
        return target(*values, dtype=dtype)


def _promote_dtype(tree) -> torch.dtype:
    """at::autocast::promote_type: the autocast dtype, widened to float32 by any float32 argument."""
    lower = torch.get_autocast_dtype(DEVICE)
    result = lower
    for value in tree_flatten(tree)[0]:
        if not _eligible(value):
            continue
        if value.dtype == torch.float32 or result == torch.float32:
            result = torch.float32
        elif value.dtype != lower:
            raise RuntimeError(f"autocast(\"npu\", dtype={lower}): {value.dtype} argument: unexpected floating "
                               "ScalarType in at::autocast::prioritize")
    return result


def _promote(op, *args, **kwargs):
    with _below_autocast():
        args, kwargs = _cast((args, kwargs), _promote_dtype((args, kwargs)))
        return op(*args, **kwargs)


def _banned(message, *args, **kwargs):
    raise RuntimeError(message)


def _policy_kernels() -> dict:
    """"name.overload" -> the AutocastPrivateUse1 kernel of its policy."""
    kernels = {}
    for policy, names in ((_lower_precision_fp, LOWER_PRECISION_FP), (_fp32, FP32),
                          (_fp32_set_opt_dtype, FP32_SET_OPT_DTYPE), (_promote, PROMOTE)):
        kernels.update({name: functools.partial(policy, _overload(name)) for name in names})
    for name, target in FP32_APPEND_DTYPE.items():
        kernels[name] = functools.partial(_fp32_append_dtype, _overload(name), _overload(target))
    for name, message in BANNED.items():
        kernels[name] = functools.partial(_banned, message)
    return kernels


def install() -> None:
    """Register the AutocastPrivateUse1 fallthrough and the policy kernels, and make `torch.npu.amp` importable
    (once per process)."""
    if _LIBRARIES:
        return
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, _KEY)
    kernels = torch.library.Library("aten", "IMPL")
    for name, kernel in _policy_kernels().items():
        kernels.impl(name, kernel, _KEY)
    _LIBRARIES.extend((fallthrough, kernels))
    sys.modules.setdefault("torch.npu.amp", sys.modules[__name__])


# ---- torch.npu's autocast functions (torch_npu npu/autocast_utils.py) ---------------------------------

def get_amp_supported_dtype() -> list[torch.dtype]:
    """float16, bfloat16, float32: torch_npu's answer where bfloat16 is supported (the SoCs emulated here)."""
    return [torch.float16, torch.bfloat16, torch.float32]


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled(DEVICE)


def set_autocast_enabled(enable: bool) -> None:
    torch.set_autocast_enabled(DEVICE, enable)


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype(DEVICE)


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype(DEVICE, dtype)


# ---- torch.npu.amp (torch_npu npu/amp/) -------------------------------------------------------------

class autocast(torch.amp.autocast_mode.autocast):
    """`torch.npu.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)` is
    `torch.autocast("npu", ...)`, float16 by default (torch_npu npu/amp/autocast_mode.py)."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        super().__init__(DEVICE, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch_npu's deprecated alias of `torch.amp.custom_fwd(..., device_type="npu")`."""
    return torch.amp.custom_fwd(fwd, device_type=DEVICE, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """torch_npu's deprecated alias of `torch.amp.custom_bwd(..., device_type="npu")`."""
    return torch.amp.custom_bwd(bwd, device_type=DEVICE)


class GradScaler(torch.amp.GradScaler):
    """`torch.npu.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval, dynamic, enabled)`:
    torch's GradScaler on "npu" with torch_npu's `dynamic` (npu/amp/grad_scaler.py): False keeps the scale
    static, `update()` then changes it only when given `new_scale`. torch_npu's NPU overflow-flag mode (for SoCs
    without inf/NaN support) does not apply: the emulated SoCs check gradients for inf/NaN."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, dynamic: bool = True, enabled: bool = True):
        super().__init__(DEVICE, init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
        self._dynamic = dynamic

    def update(self, new_scale=None) -> None:
        if self._enabled and new_scale is None and not self._dynamic:
            self._check_scale_growth_tracker("update")
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)
            return
        super().update(new_scale)

    def state_dict(self):
        state = super().state_dict()
        if self._enabled:
            state["dynamic"] = self._dynamic
        return state

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        if self._enabled:
            self._dynamic = state_dict.get("dynamic", True)
