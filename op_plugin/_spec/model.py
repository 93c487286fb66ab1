"""The validated records of a YAML op: `OpSpec` and its parts, frozen once parsed.

The rest of op_plugin trusts these objects; `parse` builds them and nothing else does.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from .._base.errors import Location
from .._ge.ir import AttrType, InputKind
from .schema import ArgKind, Schema
from .size_expr import SizeExpr

DEFAULT_NAMESPACE = "npu"

# schema argument kind -> GE attr value type, as get_registered_ir_def reports it
GE_ATTR_TYPES = {
    ArgKind.INT: AttrType.INT, ArgKind.FLOAT: AttrType.FLOAT, ArgKind.BOOL: AttrType.BOOL,
    ArgKind.STR: AttrType.STRING, ArgKind.INT_LIST: AttrType.LIST_INT, ArgKind.FLOAT_LIST: AttrType.LIST_FLOAT,
    ArgKind.BOOL_LIST: AttrType.LIST_BOOL, ArgKind.SCALAR_TYPE: AttrType.DATA_TYPE,
    # A Scalar becomes a float attr, as CANN's scalar attrs are (Muls, Adds, ...); the reference
    # kernel on the simulator receives that float.
    ArgKind.SCALAR: AttrType.FLOAT,
}


def default_ge_type(op_name: str) -> str:
    """TorchAir's auto-converter naming: drop `_functional`, CamelCase the rest (npu_ prefix kept)."""
    base = op_name[: -len("_functional")] if op_name.endswith("_functional") else op_name
    return "".join(part[:1].upper() + part[1:] for part in base.split("_") if part)


@dataclass(frozen=True)
class OutputSpec:
    """How the Meta function builds one returned tensor."""

    size: SizeExpr | None          # None when the return aliases an argument (`same_as`)
    dtype_from_arg: str | None     # copy this argument's dtype ...
    dtype: torch.dtype | None      # ... or use this fixed dtype
    same_as: str | None            # the mutated argument an aliased return is


@dataclass(frozen=True)
class GeInput:
    ge_name: str
    arg: str
    kind: InputKind


@dataclass(frozen=True)
class GeAttr:
    """A GE attr: an op argument (`arg`), a constant (`const`), or the length of a Tensor[] (`length_of`)."""

    ge_name: str
    value_type: AttrType
    arg: str | None = None
    const: Any = None
    length_of: str | None = None

    def value(self, bound: Mapping[str, Any]) -> Any:
        if self.arg is not None:
            return bound[self.arg]
        if self.length_of is not None:
            return len(bound[self.length_of])
        return self.const


@dataclass(frozen=True)
class GeSpec:
    type: str
    inputs: tuple[GeInput, ...]
    attrs: tuple[GeAttr, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class TensorSample:
    dtype: torch.dtype
    shape: tuple[int | str, ...]   # ints, or names from the op's `dims:`
    low: int | str | None = None   # integer tensors: values drawn from [low, high)
    high: int | str | None = None
    unique: bool = False


class SampleValue(NamedTuple):
    arg: str
    value: Any                     # TensorSample | tuple of them | tuple of scalars | scalar | None


class DtypeRule(NamedTuple):
    arg: str
    allowed: frozenset[torch.dtype]


class DimSize(NamedTuple):
    name: str
    size: int


@dataclass(frozen=True)
class Sample:
    values: tuple[SampleValue, ...]
    location: Location


@dataclass(frozen=True)
class AclnnSpec:
    """The op's eager NPU kernel: a two-phase aclnn API (`<function>GetWorkspaceSize`, `<function>`)
    exported by `library` (a file name looked up by the dynamic loader, or a path)."""

    function: str
    library: str


@dataclass(frozen=True)
class OpSpec:
    namespace: str
    schema: Schema
    doc: str
    outputs: tuple[OutputSpec, ...] | None   # None: the Meta function comes from meta/ or @op_plugin.meta
    dtypes: tuple[DtypeRule, ...]            # accepted dtypes per tensor argument
    ge: GeSpec | None
    dims: tuple[DimSize, ...]
    samples: tuple[Sample, ...]
    location: Location                       # the op's `func:` line
    aclnn: AclnnSpec | None = None           # the eager NPU kernel through aclnn, if declared

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def overload_name(self) -> str:
        """`name` or `name.overload`, as torch.library names an overload."""
        return self.schema.name + (f".{self.schema.overload}" if self.schema.overload else "")

    @property
    def qualname(self) -> str:
        """`ns::name` or `ns::name.overload`: what load_yaml returns."""
        return f"{self.namespace}::{self.overload_name}"

    @property
    def differentiable(self) -> bool:
        return not self.schema.is_mutable

    def field(self, field: str) -> Location:
        """Where a field of this op is reported: the op's YAML line, with the field named."""
        return self.location.with_field(field)
