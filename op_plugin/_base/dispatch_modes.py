"""Python dispatch modes set aside where an NPU runs natively, below torch's dispatcher: a GE graph's run
(hosting/native_stub.py) and an NPU graph's replay (_simulator/device/graphs.py). A mode active around them (a
user's, or AOT autograd's custom-op aliasing check, which wraps the first call of every compiled function) never
sees those kernels on an NPU; the simulator's kernels are aten calls, so the modes are set aside while they run.
Without that, each GE kernel went through AOT's check in Python on a compiled function's first call (issue 28: ~30%
of a 2-layer model's first run)."""
from __future__ import annotations

import contextlib

import torch


def dispatch_modes_active() -> bool:
    return bool(torch._C._len_torch_dispatch_stack() or torch._ops._len_torch_dispatch_stack_pre_dispatch())


def outside_python_dispatch_modes():
    """The active Python dispatch modes set aside; with none active (every steady call), nothing to do."""
    if not dispatch_modes_active():
        return contextlib.nullcontext()
    from torch.utils._python_dispatch import _disable_current_modes

    return _disable_current_modes()
