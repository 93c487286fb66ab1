"""Module-level helpers shared by the kernel test modules of several op classes (imported by package path:
`from tests.simulator.kernels.helpers import ...`); fixtures are in tests/simulator/conftest.py."""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

import op_plugin  # noqa: F401
from op_plugin._testing_harness import check_compiled

F16 = torch.float16
F32 = torch.float32
BF16 = torch.bfloat16
F64 = torch.float64
I32 = torch.int32
I64 = torch.int64
BOOL = torch.bool


aten = torch.ops.aten


_X = torch.tensor([-2.0, -0.5, 0.25, 1.5, 3.0])


# npugraph against eager computed in float32 and rounded once, within the "grad" tolerances (times `scale`)
check_grad_case = functools.partial(check_compiled, oracle_in_float32=True, kind="grad")


def _randn(*shape, dtype=F32, low=-4.0, high=4.0):
    return (torch.rand(shape) * (high - low) + low).to(dtype)


_IDS = {F32: "fp32", F16: "fp16", BF16: "bf16"}


class TinyCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def _r(*shape, dtype=F32):
    return torch.randn(*shape).to(dtype)
