"""What each GE node output must be, read once from the graph, and the check of a result against it.

TorchAir itself checks only the number of outputs. What a desc declares: TorchAir fills unknown
output dtypes with DT_FLOAT (`_normalize_ge_graph`) and leaves intermediate shapes unset, so a
DT_FLOAT desc is trusted only when it carries TorchAir's `_meta` attr (set from the FX node's
meta), and a shape only when the desc's `shape` field is present.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from ..errors import GeExecutionError, KernelError
from ...._ge.values import (
    PROTO_DT_FLOAT, PROTO_DT_UNDEFINED, UNKNOWN_DIM, UNKNOWN_RANK, UnsupportedGeDtype, proto_dtype_to_torch,
)


class OutputCheck(NamedTuple):
    """What one output must be: `where` names it in errors; None means not declared."""

    where: str
    dtype: torch.dtype | None
    shape: list[int] | None


def output_check(desc, where: str, *, trust_float: bool) -> OutputCheck:
    """(where, dtype or None, shape or None) that a tensor described by `desc` must have."""
    shape = [int(dim) for dim in desc.shape.dim] if desc.HasField("shape") else None
    return OutputCheck(where, _declared_dtype(desc, trust_float, where), shape)


def check_output(tensor: torch.Tensor, check: OutputCheck) -> None:
    where, expected_dtype, declared = check
    if expected_dtype is not None and tensor.dtype != expected_dtype:
        raise GeExecutionError(f"{where}: dtype mismatch, expected {expected_dtype}, got {tensor.dtype}")
    if declared is not None and not _shape_matches(declared, list(tensor.shape)):
        raise GeExecutionError(f"{where}: shape mismatch, expected {declared}, got {list(tensor.shape)}")


def _declared_dtype(desc, trust_float: bool, where: str):
    number = desc.dtype
    if number == PROTO_DT_UNDEFINED:
        return None
    if number == PROTO_DT_FLOAT and not trust_float and "_meta" not in desc.attr:
        return None  # possibly TorchAir's default fill for an unknown dtype
    try:
        return proto_dtype_to_torch(number)
    except UnsupportedGeDtype as error:
        raise GeExecutionError(f"{where}: {error}") from None


def _shape_matches(declared: list, actual: list) -> bool:
    if declared == [UNKNOWN_RANK]:
        return True
    if len(declared) != len(actual):
        return False
    return all(want in (UNKNOWN_DIM, UNKNOWN_RANK) or want == got for want, got in zip(declared, actual, strict=True))


def check_tensor(tensor: torch.Tensor, desc, where: str, *, trust_float: bool) -> None:
    check_output(tensor, output_check(desc, where, trust_float=trust_float))


def kernel_failure(op, error: Exception) -> GeExecutionError:
    """The error a failing kernel becomes, naming its node: a refusal (KernelError) as the kernel
    worded it, anything else (a torch error) as a failure of the kernel."""
    if isinstance(error, KernelError):
        return GeExecutionError(f"{op.type} (node {op.name!r}): {error}")
    return GeExecutionError(f"GE kernel for {op.type} failed on node {op.name!r}: {error}")
