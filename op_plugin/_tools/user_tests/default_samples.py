"""Default samples for a YAML op that declares no `samples:` (`op-plugin test`).

The inputs come from the schema and `dtypes:`: each tensor argument gets the first accepted dtype
(float32 when accepted), and the shapes are tried from a short list of common layouts (all alike,
a row-vector operand, a linear or matmul weight) until the reference kernel runs on them and
gives the shapes the Meta function gives. Sizes are named dims, so the dynamic check still sees new
sizes. A required `str` argument, or no layout the kernel accepts, is reported: the op then needs
its own `samples:`.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ... import _registry
from ..._base.errors import MissingImplementationError
from ..._spec.model import DimSize, OpSpec, Sample, SampleValue, TensorSample
from ..._spec.schema import ArgKind
from .samples import SampleCase
from .checks import check_meta_matches_reference

_DIMS = (DimSize("_N", 4), DimSize("_C", 6), DimSize("_K", 5))
# (first tensor, every later tensor): shapes in dims names
_LAYOUTS = (
    (("_N", "_C"), ("_N", "_C")),     # elementwise
    (("_C",), ("_C",)),               # 1-D
    (("_N", "_C"), ("_C",)),          # a row-vector operand (scale, bias, gamma)
    (("_N", "_C"), ("_K", "_C")),     # x @ weight.T (linear)
    (("_N", "_C"), ("_C", "_K")),     # x @ weight (matmul)
)
_SCALARS = {ArgKind.INT: 2, ArgKind.FLOAT: 0.5, ArgKind.SCALAR: 0.5, ArgKind.BOOL: False,
            ArgKind.INT_LIST: (1,), ArgKind.FLOAT_LIST: (0.5,), ArgKind.BOOL_LIST: (False,)}


class NoDefaultSample(Exception):
    """No default sample can be derived (the reason is the message)."""


class DefaultSampleCase(SampleCase):
    """A sample derived from the schema, shown as `<op>-default`."""

    @property
    def id(self) -> str:
        return f"{self.spec.name}-default"


def _dtype_of(spec: OpSpec, arg_name: str) -> torch.dtype:
    allowed = next((rule.allowed for rule in spec.dtypes if rule.arg == arg_name), None)
    if not allowed or torch.float32 in allowed:
        return torch.float32
    return sorted(allowed, key=str)[0]


def _candidates(spec: OpSpec) -> list[tuple[SampleValue, ...]]:
    fixed: list[SampleValue] = []
    for arg in spec.schema.non_tensor_args:
        if arg.has_default:
            continue  # the schema's default
        if arg.kind is ArgKind.SCALAR_TYPE:
            fixed.append(SampleValue(arg.name, "float32"))
        elif arg.kind in _SCALARS:
            fixed.append(SampleValue(arg.name, _SCALARS[arg.kind]))
        else:
            raise NoDefaultSample(f"argument '{arg.name}' ({arg.kind.value}) has no default to derive a value from")
    tensors = [a for a in spec.schema.tensor_args if not (a.kind is ArgKind.OPTIONAL_TENSOR and a.has_default)]
    if not tensors:
        raise NoDefaultSample("no tensor argument to build an input for")
    candidates = []
    for first, rest in _LAYOUTS:
        values = list(fixed)
        for position, arg in enumerate(tensors):
            tensor = TensorSample(_dtype_of(spec, arg.name), first if position == 0 else rest)
            values.append(SampleValue(arg.name, (tensor, tensor) if arg.kind is ArgKind.TENSOR_LIST else tensor))
        candidates.append(tuple(values))
    return candidates


def default_sample_case(spec: OpSpec) -> DefaultSampleCase:
    """The first derived sample the reference kernel runs on; NoDefaultSample says why none does."""
    st = _registry.find(spec.qualname)
    if st is None or st.reference is None:
        raise NoDefaultSample(f"no reference kernel to try derived inputs on "
                              f"(@op_plugin.reference('{spec.qualname}'))")
    derived = replace(spec, dims=tuple(spec.dims) + _DIMS)
    errors = []
    for values in _candidates(spec):
        case = DefaultSampleCase(derived, 0, Sample(values, spec.field("samples")))
        args, kwargs = case.inputs()
        try:
            with torch.no_grad():
                case.op(*args, **kwargs)
                check_meta_matches_reference(case)  # a layout the Meta function reads otherwise is another op's
        except MissingImplementationError:
            return case  # no Meta function: the meta check reports it
        except Exception as exc:  # the kernel refuses this layout: try the next
            errors.append(f"{_shapes(values)}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            continue
        return case
    raise NoDefaultSample("the reference kernel ran on none of the derived layouts (" + "; ".join(errors) + ")")


def _shapes(values: tuple[SampleValue, ...]) -> str:
    shown = []
    for name, value in values:
        item = value[0] if isinstance(value, tuple) and value and isinstance(value[0], TensorSample) else value
        if isinstance(item, TensorSample):
            shown.append(f"{name}=[{', '.join(str(d).lstrip('_') for d in item.shape)}]")
    return " ".join(shown)

