"""The `samples:` field of a YAML op: inputs for generated tests, checked against the schema and `dims:`.

A sample's tensors are built in full (`op-plugin test`, `op_plugin.testing`), so their size is bounded before
anything is allocated: together at most MAX_SAMPLE_ELEMENTS elements and MAX_SAMPLE_BYTES bytes, checked
here at the `dims:` sizes (a located error naming the field where the total passes the limit) and again
by `SampleCase.inputs` at the sizes of each call (the dynamic check's variants are a little larger).
"""
from __future__ import annotations

import math
from typing import Any

from .dtypes import DTYPES, is_dtype_name
from .model import SampleValue, Sample, TensorSample
from .op_parser import OpParser
from .schema import Arg, ArgKind, Schema


# The most a sample's tensors may hold together: enough for any op test (a [64, 1024, 1024] float32 tensor),
# far below what would exhaust a host (a [100000, 100000, 100000] float32 sample asked for 4e15 bytes).
MAX_SAMPLE_ELEMENTS = 1 << 26
MAX_SAMPLE_BYTES = 1 << 28  # 256 MiB


def sample_size_problem(values, sizes: dict[str, int]) -> tuple[str, str] | None:
    """(field suffix, message) when the tensors among `values` (SampleValue records) would hold more than the
    limits at `sizes` (dim name -> size), naming the tensor at which the running total passes it; else None."""
    elements = total_bytes = 0
    for arg, value in values:
        tensors = [(f".{arg}", value)] if isinstance(value, TensorSample) else [
            (f".{arg}[{i}]", v) for i, v in enumerate(value)
            if isinstance(v, TensorSample)] if isinstance(value, tuple) else []
        for suffix, tensor in tensors:
            shape = [sizes.get(d, 0) if isinstance(d, str) else d for d in tensor.shape]
            count = math.prod(shape)
            elements += count
            total_bytes += count * tensor.dtype.itemsize
            if elements > MAX_SAMPLE_ELEMENTS or total_bytes > MAX_SAMPLE_BYTES:
                dtype = str(tensor.dtype).replace("torch.", "")
                return suffix, (f"{dtype} {shape} brings the sample's tensors to {elements} elements "
                                f"({total_bytes} bytes); a sample may hold at most {MAX_SAMPLE_ELEMENTS} elements "
                                f"and {MAX_SAMPLE_BYTES} bytes (256 MiB) in all, since its tensors are built in "
                                "full: use smaller sizes (the checks need no large ones)")
    return None


def parse_samples(p: OpParser, schema: Schema, dims: dict[str, int], raw: Any) -> tuple[Sample, ...]:
    if not isinstance(raw, list):
        raise p.fail(("samples",), "samples", "expected a list of mappings argument -> value")
    samples = []
    for i, item in enumerate(raw):
        sub, field = ("samples", i), f"samples[{i}]"
        if not isinstance(item, dict):
            raise p.fail(sub, field, "expected a mapping argument -> value")
        for name in item:
            if schema.arg(name) is None:
                raise p.fail(sub + (name,), f"{field}.{name}", f"'{name}' is not an argument of the op")
        values = []
        for arg in schema.args:
            if arg.name not in item:
                if not arg.has_default:
                    raise p.fail(sub, f"{field}.{arg.name}", f"required argument '{arg.name}' has no value")
                continue
            values.append(SampleValue(arg.name, _parse_sample_value(p, sub + (arg.name,), f"{field}.{arg.name}",
                                                         arg, dims, item[arg.name])))
        too_big = sample_size_problem(values, dims)
        if too_big is not None:
            suffix, message = too_big
            raise p.fail(sub + (suffix.lstrip(".").split("[")[0],), field + suffix, message)
        samples.append(Sample(tuple(values), p.doc.location(p.path + sub, p.op, field)))
    return tuple(samples)


def _parse_sample_value(p: OpParser, sub: tuple, field: str, arg: Arg, dims: dict, value: Any) -> Any:
    kind = arg.kind
    if value is None:
        if not arg.optional:
            raise p.fail(sub, field, f"'{arg.name}' is not optional and cannot be null")
        return None
    if kind in (ArgKind.TENSOR, ArgKind.OPTIONAL_TENSOR):
        return _parse_tensor_sample(p, sub, field, dims, value)
    if kind is ArgKind.TENSOR_LIST:
        if not isinstance(value, list) or not value:
            raise p.fail(sub, field, "expected a non-empty list of [dtype, shape] entries")
        return tuple(_parse_tensor_sample(p, sub + (i,), f"{field}[{i}]", dims, v) for i, v in enumerate(value))
    checks = {
        ArgKind.INT: lambda v: type(v) is int or _is_dim(v, dims),
        ArgKind.FLOAT: lambda v: type(v) in (int, float),
        ArgKind.SCALAR: lambda v: type(v) in (int, float, bool),
        ArgKind.BOOL: lambda v: type(v) is bool,
        ArgKind.STR: lambda v: isinstance(v, str),
        ArgKind.SCALAR_TYPE: is_dtype_name,
        ArgKind.INT_LIST: lambda v: isinstance(v, list) and all(type(x) is int or _is_dim(x, dims) for x in v),
        ArgKind.FLOAT_LIST: lambda v: isinstance(v, list) and all(type(x) in (int, float) for x in v),
        ArgKind.BOOL_LIST: lambda v: isinstance(v, list) and all(type(x) is bool for x in v),
    }
    if not checks[kind](value):
        raise p.fail(sub, field, f"'{arg.name}' is {kind.value}; {value!r} does not fit")
    return tuple(value) if isinstance(value, list) else value


def _parse_tensor_sample(p: OpParser, sub: tuple, field: str, dims: dict, value: Any) -> TensorSample:
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise p.fail(sub, field, "a tensor sample is [dtype, shape] or [dtype, shape, {low, high, unique}]")
    dtype_name, shape = value[0], value[1]
    if not is_dtype_name(dtype_name):
        raise p.fail(sub, field, f"unknown dtype '{dtype_name}'; known: {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all((type(d) is int and d >= 0) or _is_dim(d, dims) for d in shape):
        raise p.fail(sub, field, "shape must be a list of non-negative integers or names from `dims:` "
                                 f"({', '.join(dims) or 'none declared'})")
    options = value[2] if len(value) == 3 else {}
    if not isinstance(options, dict) or set(options) - {"low", "high", "unique"}:
        raise p.fail(sub, field, "tensor options are a mapping with low, high, unique")
    for bound in ("low", "high"):
        if bound in options and not (type(options[bound]) is int or _is_dim(options[bound], dims)):
            raise p.fail(sub, field, f"'{bound}' must be an integer or a name from `dims:`")
    return TensorSample(DTYPES[dtype_name], tuple(shape), options.get("low"), options.get("high"),
                        bool(options.get("unique", False)))


def _is_dim(value: Any, dims: dict) -> bool:
    return isinstance(value, str) and value in dims
