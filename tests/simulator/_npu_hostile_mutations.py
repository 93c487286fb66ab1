"""Hostile variants of a valid npu-op call, and the bounds each call runs under (npu/test_hostile.py,
kernels/test_npu_hostile.py).

A variant is (label, kind, args, kwargs): kind "same" is valid-but-unusual input (non-contiguous or
stride-0 storage of the same values) whose result must equal the call on contiguous copies; kind
"hostile" must either be refused with an error naming the op, or return outputs of the shapes and
dtypes the op's Meta function gives for the same call (nothing silently different from what an NPU
host would trace)."""
from __future__ import annotations

import contextlib
import resource
import signal

import torch

HUGE = 2 ** 40
MEMORY_HEADROOM = 1 << 30   # bytes of address space a call may add
SECONDS = 20                # hang guard per call


def _paths(args, kwargs):
    """(container, key) of every tensor argument, tensors inside lists included."""
    found = []
    for container in (args, kwargs):
        for key in (range(len(container)) if isinstance(container, list) else list(container)):
            value = container[key]
            if isinstance(value, torch.Tensor):
                found.append((container, key, None))
            elif isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
                found.extend((container, key, i) for i in range(len(value)))
    return found


def _ints(args, kwargs):
    """(container, key, index or None) of every int / int-list argument (not bools, not dtypes)."""
    found = []
    for container in (args, kwargs):
        for key in (range(len(container)) if isinstance(container, list) else list(container)):
            value = container[key]
            if isinstance(value, int) and not isinstance(value, bool):
                found.append((container, key, None))
            elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
                found.extend((container, key, i) for i in range(len(value)))
    return found


def _get(container, key, index):
    return container[key] if index is None else container[key][index]


def _set(container, key, index, value):
    if index is None:
        container[key] = value
    else:
        container[key] = list(container[key])
        container[key][index] = value


def non_contiguous(t: torch.Tensor) -> torch.Tensor:
    """The same values in storage with gaps (every other element), so strides are not the contiguous ones."""
    if t.numel() == 0:
        return t
    wide = torch.zeros(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype) if t.dim() else torch.zeros(2, dtype=t.dtype)
    view = wide[..., ::2] if t.dim() else wide[0]
    view.copy_(t)
    assert t.dim() == 0 or not view.is_contiguous() or t.shape[-1] <= 1
    return view


def expanded(t: torch.Tensor) -> torch.Tensor:
    """A stride-0 view: the first slice of dim 0 repeated (different values from t, same shape)."""
    if t.dim() == 0 or t.shape[0] < 2:
        return t
    return t[:1].expand(t.shape)


def tensor_mutations(t: torch.Tensor):
    """(label, kind, replacement) for one tensor argument."""
    out = [("non-contiguous", "same", non_contiguous(t))]
    if t.dim() and t.shape[0] >= 2:
        out.append(("expanded stride-0", "same-expanded", expanded(t)))
    float_like = t.is_floating_point()
    for dtype in (torch.int32, torch.float64, torch.bool, torch.float32, torch.int64):
        if dtype != t.dtype and not (dtype == torch.float32 and float_like):
            out.append((f"dtype {dtype}", "hostile", t.to(dtype)))
    out.append(("rank+1", "hostile", t.unsqueeze(0)))
    if t.dim():
        out.append(("rank-1", "hostile", t[0]))
        out.append(("last dim +1", "hostile", torch.cat([t, t.narrow(-1, 0, 1)], -1) if t.shape[-1] else t))
        out.append(("dim 0 empty", "hostile", t[:0]))
        out.append(("last dim empty", "hostile", t[..., :0]))
    if float_like and t.numel():
        bad = t.clone().flatten()
        bad[0], bad[-1] = float("nan"), float("inf")
        out.append(("nan/inf values", "values", bad.reshape(t.shape)))
    if not float_like and t.dtype != torch.bool and t.numel():
        info = torch.iinfo(t.dtype)
        for value in sorted({-1, max(info.min, -(2 ** 31)), min(info.max, 10 ** 6), min(info.max, 2 ** 31 - 1)}):
            bad = t.clone().flatten()
            bad[-1] = value
            out.append((f"index value {value}", "hostile", bad.reshape(t.shape)))
    return out


def variants(args, kwargs):
    """Every hostile variant of the call (args, kwargs): fresh containers, the original untouched."""
    result = []
    base_args = list(args)
    for position, (container, key, index) in enumerate(_paths(base_args, kwargs)):
        tensor = _get(container, key, index)
        where = f"tensor #{position} ({key if index is None else f'{key}[{index}]'})"
        for label, kind, replacement in tensor_mutations(tensor):
            new_args, new_kwargs = list(args), dict(kwargs)
            target = new_args if container is base_args else new_kwargs
            _set(target, key, index, replacement)
            result.append((f"{where}: {label}", kind, new_args, new_kwargs))
    for container, key, index in _ints(base_args, kwargs):
        value = _get(container, key, index)
        for bad in (-1, 0, value + 1, HUGE, -HUGE):
            if bad == value:
                continue
            new_args, new_kwargs = list(args), dict(kwargs)
            _set(new_args if container is base_args else new_kwargs, key, index, bad)
            where = key if index is None else f"{key}[{index}]"
            result.append((f"int {where} = {bad}", "hostile", new_args, new_kwargs))
    return result


def contiguous_copy(value):
    if isinstance(value, torch.Tensor):
        return value.contiguous().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(contiguous_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: contiguous_copy(v) for k, v in value.items()}
    return value


def _vm_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


class Hang(Exception):
    pass


@contextlib.contextmanager
def bounded(seconds: int = SECONDS, headroom: int = MEMORY_HEADROOM):
    """Run the body under a hang guard (SIGALRM) and a cap on new address space (RLIMIT_AS soft limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_bytes() + headroom
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)

    def _alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, previous)


def int_arguments(args, kwargs):
    """Where an integer can go: ("scalar", in_kwargs, key, list index or None) for int and int-list
    arguments, ("tensor", in_kwargs, key, list index or None) for the last element of an integer tensor."""
    found = []
    for in_kwargs, container in ((False, list(args)), (True, dict(kwargs))):
        pair = (container, {}) if not in_kwargs else ([], container)
        found += [("scalar", in_kwargs, key, index) for _, key, index in _ints(*pair)]
        for _, key, index in _paths(*pair):
            tensor = _get(container, key, index)
            if not tensor.is_floating_point() and tensor.dtype != torch.bool and tensor.numel():
                found.append(("tensor", in_kwargs, key, index))
    return found


def replace_int(args, kwargs, where, value):
    """(label, args, kwargs) with `value` put where `where` says; (label, None, None) if it does not fit."""
    kind, in_kwargs, key, index = where
    new_args, new_kwargs = list(args), dict(kwargs)
    container = new_kwargs if in_kwargs else new_args
    name = key if index is None else f"{key}[{index}]"
    if kind == "scalar":
        _set(container, key, index, value)
        return f"int {name} = {value}", new_args, new_kwargs
    tensor = _get(container, key, index)
    info = torch.iinfo(tensor.dtype)
    label = f"tensor {name}: last element = {value}"
    if not info.min <= value <= info.max:
        return label, None, None
    bad = tensor.clone().flatten()
    bad[-1] = value
    _set(container, key, index, bad.reshape(tensor.shape))
    return label, new_args, new_kwargs
