"""Frozen, validated operator specs parsed once from a YAML document.

Everything a YAML entry can get wrong is found here, before anything is registered, and reported
with file, line, op and field. The rest of op_plugin trusts these objects.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ._dtypes import DTYPES
from ._errors import Location, YamlSpecError
from ._schema import Arg, ArgKind, Schema, SchemaParseError, parse_schema
from ._size_expr import SizeExpr, SizeExprError, compile_size_expr
from ._yaml_source import LocatedDocument

DEFAULT_NAMESPACE = "npu"
_FILE_FIELDS = ("namespace", "ops")
_OP_FIELDS = ("func", "doc", "outputs", "dtypes", "ge", "dims", "samples")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GE_TYPE = re.compile(r"^[A-Z][A-Za-z0-9]*$")

GE_ATTR_KINDS = {  # schema argument kind -> GE attr value type, as get_registered_ir_def reports it
    ArgKind.INT: "VT_INT", ArgKind.FLOAT: "VT_FLOAT", ArgKind.BOOL: "VT_BOOL", ArgKind.STR: "VT_STRING",
    ArgKind.INT_LIST: "VT_LIST_INT", ArgKind.FLOAT_LIST: "VT_LIST_FLOAT", ArgKind.BOOL_LIST: "VT_LIST_BOOL",
    ArgKind.SCALAR_TYPE: "VT_DATA_TYPE",
}


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
    kind: str                      # "required" | "optional" | "dynamic"


@dataclass(frozen=True)
class GeAttr:
    """A GE attr: an op argument (`arg`), a constant (`const`), or the length of a Tensor[] (`length_of`)."""

    ge_name: str
    value_type: str                # "VT_INT", "VT_FLOAT", ... as get_registered_ir_def reports it
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


@dataclass(frozen=True)
class Sample:
    values: tuple[tuple[str, Any], ...]   # argument name -> TensorSample | list | scalar | None
    location: Location


@dataclass(frozen=True)
class OpSpec:
    namespace: str
    schema: Schema
    doc: str
    outputs: tuple[OutputSpec, ...] | None   # None: the Meta function comes from meta/ or @op_plugin.meta
    dtypes: tuple[tuple[str, frozenset[torch.dtype]], ...]   # argument name -> accepted dtypes
    ge: GeSpec | None
    dims: tuple[tuple[str, int], ...]
    samples: tuple[Sample, ...]
    location: Location                       # the op's `func:` line

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def qualname(self) -> str:
        """`ns::name` or `ns::name.overload`: what load_yaml returns."""
        overload = f".{self.schema.overload}" if self.schema.overload else ""
        return f"{self.namespace}::{self.schema.name}{overload}"

    @property
    def differentiable(self) -> bool:
        return not self.schema.is_mutable


def parse_document(doc: LocatedDocument) -> tuple[OpSpec, ...]:
    """Validate a whole document; the first problem raises YamlSpecError."""
    data = doc.data
    if not isinstance(data, dict):
        raise YamlSpecError(doc.location(()), "the file must be a mapping with an `ops:` list")
    _reject_unknown(doc, (), data, _FILE_FIELDS, None)
    namespace = data.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not _IDENT.match(namespace):
        raise YamlSpecError(doc.location(("namespace",), field="namespace"), f"'{namespace}' is not a valid namespace")
    ops = data.get("ops")
    if not isinstance(ops, list) or not ops:
        raise YamlSpecError(doc.location(("ops",), field="ops"), "expected a non-empty list of ops")
    specs = [_parse_op(doc, namespace, i, entry) for i, entry in enumerate(ops)]
    seen: dict[str, OpSpec] = {}
    for spec in specs:
        if spec.qualname in seen:
            raise YamlSpecError(spec.location.with_field("func"),
                                f"{spec.qualname} is defined twice in this file (first at line {seen[spec.qualname].location.line})")
        seen[spec.qualname] = spec
    return tuple(specs)


class _OpParser:
    """Parses one `ops:` entry; `fail` builds errors that carry the op and field."""

    def __init__(self, doc: LocatedDocument, path: tuple, op_name: str | None):
        self.doc, self.path, self.op = doc, path, op_name

    def fail(self, sub: tuple, field: str, message: str) -> YamlSpecError:
        return YamlSpecError(self.doc.location(self.path + sub, self.op, field), message)


def _parse_op(doc: LocatedDocument, namespace: str, index: int, entry: Any) -> OpSpec:
    path = ("ops", index)
    p = _OpParser(doc, path, None)
    if not isinstance(entry, dict):
        raise p.fail((), f"ops[{index}]", "each op must be a mapping with at least `func:`")
    func = entry.get("func")
    if not isinstance(func, str) or not func.strip():
        raise p.fail(("func",), "func", "missing `func:` (the ATen schema, e.g. `my_op(Tensor x) -> Tensor`)")
    try:
        schema = parse_schema(func.strip())
    except SchemaParseError as exc:
        p.op = func.split("(", 1)[0].strip() or None
        raise p.fail(("func",), "func", f"invalid schema: {exc}") from None
    p.op = schema.name + (f".{schema.overload}" if schema.overload else "")
    _reject_unknown(doc, path, entry, _OP_FIELDS, p.op)
    _check_schema_supported(p, schema)
    doc_text = entry.get("doc", "")
    if not isinstance(doc_text, str) or "\n" in doc_text.strip():
        raise p.fail(("doc",), "doc", "`doc:` must be one line of text")
    dims = _parse_dims(p, entry.get("dims", {}))
    return OpSpec(
        namespace=namespace, schema=schema, doc=doc_text.strip(),
        outputs=_parse_outputs(p, schema, entry),
        dtypes=_parse_dtypes(p, schema, entry.get("dtypes")),
        ge=_parse_ge(p, schema, entry["ge"]) if "ge" in entry else None,
        dims=dims,
        samples=_parse_samples(p, schema, dict(dims), entry.get("samples", [])),
        location=doc.location(path + ("func",), p.op),
    )


def _reject_unknown(doc: LocatedDocument, path: tuple, mapping: dict, allowed: tuple, op: str | None) -> None:
    for key in mapping:
        if key not in allowed:
            raise YamlSpecError(doc.location(path + (key,), op, str(key)),
                                f"unknown field '{key}'; allowed fields: {', '.join(allowed)}")


def _check_schema_supported(p: _OpParser, schema: Schema) -> None:
    for arg in schema.args:
        if arg.kind is ArgKind.OTHER:
            raise p.fail(("func",), "func", f"argument '{arg.name}' has a type op_plugin does not support yet "
                         "(supported: Tensor, Tensor?, Tensor[], int, SymInt, int[], SymInt[], float, float[], "
                         "bool, bool[], str, ScalarType)")
    if not schema.returns:
        return
    for i, ret in enumerate(schema.returns):
        if not ret.is_tensor:
            raise p.fail(("func",), "func", f"return {i} is not a Tensor; ops return tensors")
        if ret.alias_set and schema.aliased_arg(ret) is None:
            raise p.fail(("func",), "func", f"return {i} aliases '({ret.alias_set}!)' but no argument has that annotation")
    mutated = [a for a in schema.args if a.mutated]
    if any(a.kind is not ArgKind.TENSOR for a in mutated):
        raise p.fail(("func",), "func", "only plain Tensor arguments can be mutated (Tensor(a!))")
    if any(r.alias_set for r in schema.returns) and schema.args and not schema.args[0].mutated:
        raise p.fail(("func",), "func", "an op returning an alias must mutate its first argument and return it "
                     "(in-place convention, e.g. `my_op_(Tensor(a!) self, ...) -> Tensor(a!)`)")


def _parse_dims(p: _OpParser, raw: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, dict):
        raise p.fail(("dims",), "dims", "expected a mapping of size names to integers, e.g. {B: 4, S: 8}")
    for name, value in raw.items():
        if not isinstance(name, str) or not _IDENT.match(name):
            raise p.fail(("dims", name), f"dims.{name}", "dim names must be identifiers")
        if type(value) is not int or value < 2:
            # 0 and 1 specialise under torch.compile, so they make poor dynamic-shape samples.
            raise p.fail(("dims", name), f"dims.{name}", f"expected an integer >= 2, got {value!r}")
    return tuple(raw.items())


def _parse_outputs(p: _OpParser, schema: Schema, entry: dict) -> tuple[OutputSpec, ...] | None:
    raw = entry.get("outputs")
    if raw is None:
        if schema.returns and all(r.alias_set for r in schema.returns):
            return tuple(OutputSpec(None, None, None, schema.aliased_arg(r).name) for r in schema.returns)
        return None if schema.returns else ()
    if not isinstance(raw, list):
        raise p.fail(("outputs",), "outputs", "expected a list with one entry per returned tensor")
    if len(raw) != len(schema.returns):
        raise p.fail(("outputs",), "outputs",
                     f"the schema returns {len(schema.returns)} tensor(s) but `outputs:` has {len(raw)} "
                     f"{'entry' if len(raw) == 1 else 'entries'}")
    return tuple(_parse_output(p, schema, i, item, ret) for i, (item, ret) in enumerate(zip(raw, schema.returns)))


def _parse_output(p: _OpParser, schema: Schema, i: int, item: Any, ret) -> OutputSpec:
    sub, field = ("outputs", i), f"outputs[{i}]"
    if not isinstance(item, dict):
        raise p.fail(sub, field, "expected a mapping with `size:` and `dtype:` (or `same_as:` for an aliased return)")
    aliased = schema.aliased_arg(ret)
    if aliased is not None or "same_as" in item:
        if set(item) != {"same_as"} or aliased is None or item["same_as"] != aliased.name:
            expected = f"{{same_as: {aliased.name}}}" if aliased else "`size:` and `dtype:`"
            raise p.fail(sub, field, f"return {i} {'aliases ' + aliased.name if aliased else 'is a new tensor'}; "
                         f"write {expected}")
        return OutputSpec(None, None, None, aliased.name)
    for key in item:
        if key not in ("size", "dtype"):
            raise p.fail(sub + (key,), f"{field}.{key}", f"unknown field '{key}'; allowed: size, dtype")
    if "size" not in item:
        raise p.fail(sub, f"{field}.size", "missing `size:`")
    try:
        size = compile_size_expr(item["size"], schema)
    except SizeExprError as exc:
        raise p.fail(sub + ("size",), f"{field}.size", str(exc)) from None
    dtype_value = item.get("dtype")
    if not isinstance(dtype_value, str):
        raise p.fail(sub + ("dtype",), f"{field}.dtype", "missing `dtype:`: an argument name or a dtype name")
    arg = schema.arg(dtype_value)
    if arg is not None:
        if not arg.kind.is_tensor:
            raise p.fail(sub + ("dtype",), f"{field}.dtype", f"argument '{dtype_value}' is not a tensor")
        return OutputSpec(size, dtype_value, None, None)
    if dtype_value in DTYPES:
        return OutputSpec(size, None, DTYPES[dtype_value], None)
    raise p.fail(sub + ("dtype",), f"{field}.dtype", f"'{dtype_value}' is neither a tensor argument nor a dtype "
                 f"({', '.join(DTYPES)})")


def _parse_dtype_list(p: _OpParser, sub: tuple, field: str, raw: Any) -> frozenset[torch.dtype]:
    if not isinstance(raw, list) or not raw:
        raise p.fail(sub, field, "expected a non-empty list of dtype names")
    for i, name in enumerate(raw):
        if name not in DTYPES:
            raise p.fail(sub + (i,), field, f"unknown dtype '{name}'; known: {', '.join(DTYPES)}")
    return frozenset(DTYPES[n] for n in raw)


def _parse_dtypes(p: _OpParser, schema: Schema, raw: Any) -> tuple[tuple[str, frozenset[torch.dtype]], ...]:
    if raw is None:
        return ()
    if isinstance(raw, list):  # one list for every tensor argument
        allowed = _parse_dtype_list(p, ("dtypes",), "dtypes", raw)
        return tuple((a.name, allowed) for a in schema.tensor_args)
    if not isinstance(raw, dict):
        raise p.fail(("dtypes",), "dtypes", "expected a list of dtype names, or a mapping argument -> list")
    rules = []
    for name, names in raw.items():
        arg = schema.arg(name)
        if arg is None or not arg.kind.is_tensor:
            raise p.fail(("dtypes", name), f"dtypes.{name}", f"'{name}' is not a tensor argument of the op")
        rules.append((name, _parse_dtype_list(p, ("dtypes", name), f"dtypes.{name}", names)))
    return tuple(rules)


def default_ge_type(op_name: str) -> str:
    """TorchAir's auto-converter naming: drop `_functional`, CamelCase the rest (npu_ prefix kept)."""
    base = op_name[: -len("_functional")] if op_name.endswith("_functional") else op_name
    return "".join(part[:1].upper() + part[1:] for part in base.split("_") if part)


def _parse_ge(p: _OpParser, schema: Schema, raw: Any) -> GeSpec:
    if not isinstance(raw, dict):
        raise p.fail(("ge",), "ge", "expected a mapping with type/inputs/attrs/outputs")
    for key in raw:
        if key not in ("type", "inputs", "attrs", "outputs"):
            raise p.fail(("ge", key), f"ge.{key}", f"unknown field '{key}'; allowed: type, inputs, attrs, outputs")
    ge_type = raw.get("type", default_ge_type(schema.name))
    if not isinstance(ge_type, str) or not _GE_TYPE.match(ge_type):
        raise p.fail(("ge", "type"), "ge.type", f"'{ge_type}' is not a GE op type (CamelCase identifier)")
    inputs = _parse_ge_inputs(p, schema, raw.get("inputs"))
    attrs = _parse_ge_attrs(p, schema, raw.get("attrs"))
    # An aliased return (in-place op) is a GE "ref" output: it has the name of the mutated input.
    ref_names = [next((i.ge_name for i in inputs if i.arg == schema.aliased_arg(r).name), None)
                 if r.alias_set else None for r in schema.returns]
    outputs = raw.get("outputs")
    if outputs is None:
        plain = ["y"] if len(schema.returns) == 1 else [f"y{i}" for i in range(len(schema.returns))]
        outputs = [ref or name for ref, name in zip(ref_names, plain)]
    if not isinstance(outputs, list) or not all(isinstance(o, str) and _IDENT.match(o) for o in outputs):
        raise p.fail(("ge", "outputs"), "ge.outputs", "expected a list of GE output names")
    if len(outputs) != len(schema.returns):
        raise p.fail(("ge", "outputs"), "ge.outputs",
                     f"the schema returns {len(schema.returns)} tensor(s) but ge.outputs names {len(outputs)}")
    for i, (ref, name) in enumerate(zip(ref_names, outputs)):
        if ref is not None and name != ref:
            raise p.fail(("ge", "outputs"), "ge.outputs", f"return {i} is the mutated input '{ref}', so its GE "
                         f"output must be the ref output '{ref}', not '{name}'")
    names = ([(i.ge_name, ("ge", "inputs"), "ge.inputs") for i in inputs]
             + [(a.ge_name, ("ge", "attrs", a.ge_name), "ge.attrs") for a in attrs]
             + [(o, ("ge", "outputs"), "ge.outputs") for o, ref in zip(outputs, ref_names) if ref is None])
    _check_unique(p, names)
    return GeSpec(ge_type, inputs, attrs, tuple(outputs))


def _named_pairs(p: _OpParser, sub: tuple, field: str, raw: Any) -> list[tuple[str, str, tuple]]:
    """`[a, {ge_name: b}]` or `{ge_name: arg}` -> [(ge_name, arg, path)]."""
    if isinstance(raw, dict):
        return [(k, v, sub + (k,)) for k, v in raw.items()]
    if not isinstance(raw, list):
        raise p.fail(sub, field, "expected a list of argument names (or `ge_name: argument` pairs)")
    pairs = []
    for i, item in enumerate(raw):
        if isinstance(item, str):
            pairs.append((item, item, sub + (i,)))
        elif isinstance(item, dict) and len(item) == 1:
            (ge_name, arg), = item.items()
            pairs.append((ge_name, arg, sub + (i,)))
        else:
            raise p.fail(sub + (i,), f"{field}[{i}]", "expected an argument name or `ge_name: argument`")
    return pairs


def _parse_ge_inputs(p: _OpParser, schema: Schema, raw: Any) -> tuple[GeInput, ...]:
    if raw is None:
        pairs = [(a.name, a.name, ("ge",)) for a in schema.tensor_args]
    else:
        pairs = _named_pairs(p, ("ge", "inputs"), "ge.inputs", raw)
    result = []
    for ge_name, arg_name, sub in pairs:
        arg = schema.arg(arg_name) if isinstance(arg_name, str) else None
        if arg is None or not arg.kind.is_tensor:
            what = "not an argument of the op" if arg is None else f"of type {arg.kind.value}, not a tensor (GE attrs go in ge.attrs)"
            raise p.fail(sub, "ge.inputs", f"'{arg_name}' is {what}")
        kind = {ArgKind.OPTIONAL_TENSOR: "optional", ArgKind.TENSOR_LIST: "dynamic"}.get(arg.kind, "required")
        result.append(GeInput(str(ge_name), arg_name, kind))
    missing = [a.name for a in schema.tensor_args if a.name not in {i.arg for i in result}]
    if missing:
        raise p.fail(("ge", "inputs"), "ge.inputs", f"tensor argument(s) {', '.join(missing)} are not mapped to a GE input")
    return tuple(result)


def _const_attr_type(value: Any) -> str | None:
    scalar = {bool: "VT_BOOL", int: "VT_INT", float: "VT_FLOAT", str: "VT_STRING"}
    if type(value) in scalar:
        return scalar[type(value)]
    if isinstance(value, list) and value:
        kinds = {type(v) for v in value}
        if len(kinds) == 1 and kinds <= {bool, int, float}:
            return {bool: "VT_LIST_BOOL", int: "VT_LIST_INT", float: "VT_LIST_FLOAT"}[kinds.pop()]
    return None


def _parse_ge_attrs(p: _OpParser, schema: Schema, raw: Any) -> tuple[GeAttr, ...]:
    if raw is None:
        pairs = [(a.name, a.name, ("ge",)) for a in schema.non_tensor_args]
    else:
        pairs = _named_pairs(p, ("ge", "attrs"), "ge.attrs", raw)
    result = []
    for ge_name, source, sub in pairs:
        if not isinstance(ge_name, str) or not _IDENT.match(ge_name):
            raise p.fail(sub, "ge.attrs", f"'{ge_name}' is not a valid GE attr name")
        if isinstance(source, dict):
            result.append(_parse_special_attr(p, schema, sub, ge_name, source))
            continue
        arg = schema.arg(source) if isinstance(source, str) else None
        if arg is None:
            raise p.fail(sub, "ge.attrs", f"'{source}' is not an argument of the op; an attr is an argument name, "
                         "{value: <constant>} or {len: <Tensor[] argument>}")
        value_type = GE_ATTR_KINDS.get(arg.kind)
        if value_type is None:
            raise p.fail(sub, "ge.attrs", f"argument '{source}' is of type {arg.kind.value}; GE attrs take "
                         "int, float, bool, str, int[], float[], bool[] or ScalarType arguments")
        result.append(GeAttr(ge_name, value_type, arg=source))
    return tuple(result)


def _parse_special_attr(p: _OpParser, schema: Schema, sub: tuple, ge_name: str, source: dict) -> GeAttr:
    if set(source) == {"value"}:
        value_type = _const_attr_type(source["value"])
        if value_type is None:
            raise p.fail(sub, "ge.attrs", f"constant {source['value']!r} for '{ge_name}' must be a bool, int, float, "
                         "str or a non-empty list of one of bool/int/float")
        return GeAttr(ge_name, value_type, const=source["value"])
    if set(source) == {"len"}:
        arg = schema.arg(source["len"]) if isinstance(source["len"], str) else None
        if arg is None or arg.kind is not ArgKind.TENSOR_LIST:
            raise p.fail(sub, "ge.attrs", f"{{len: {source['len']}}} needs a Tensor[] argument")
        return GeAttr(ge_name, "VT_INT", length_of=source["len"])
    raise p.fail(sub, "ge.attrs", f"attr '{ge_name}' must be an argument name, {{value: <constant>}} "
                 "or {len: <Tensor[] argument>}")


def _check_unique(p: _OpParser, names: list[tuple[str, tuple, str]]) -> None:
    """GE input, attr and output names share one namespace in the IR prototype."""
    seen = set()
    for name, sub, field in names:
        if name in seen:
            raise p.fail(sub, field, f"GE name '{name}' is used twice")
        seen.add(name)


def _parse_samples(p: _OpParser, schema: Schema, dims: dict[str, int], raw: Any) -> tuple[Sample, ...]:
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
            values.append((arg.name, _parse_sample_value(p, sub + (arg.name,), f"{field}.{arg.name}",
                                                         arg, dims, item[arg.name])))
        samples.append(Sample(tuple(values), p.doc.location(sub, p.op, field)))
    return tuple(samples)


def _parse_sample_value(p: _OpParser, sub: tuple, field: str, arg: Arg, dims: dict, value: Any) -> Any:
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
        ArgKind.INT: lambda v: type(v) is int or v in dims,
        ArgKind.FLOAT: lambda v: type(v) in (int, float),
        ArgKind.BOOL: lambda v: type(v) is bool,
        ArgKind.STR: lambda v: isinstance(v, str),
        ArgKind.SCALAR_TYPE: lambda v: v in DTYPES,
        ArgKind.INT_LIST: lambda v: isinstance(v, list) and all(type(x) is int or x in dims for x in v),
        ArgKind.FLOAT_LIST: lambda v: isinstance(v, list) and all(type(x) in (int, float) for x in v),
        ArgKind.BOOL_LIST: lambda v: isinstance(v, list) and all(type(x) is bool for x in v),
    }
    if not checks[kind](value):
        raise p.fail(sub, field, f"'{arg.name}' is {kind.value}; {value!r} does not fit")
    return tuple(value) if isinstance(value, list) else value


def _parse_tensor_sample(p: _OpParser, sub: tuple, field: str, dims: dict, value: Any) -> TensorSample:
    if not isinstance(value, list) or len(value) not in (2, 3):
        raise p.fail(sub, field, "a tensor sample is [dtype, shape] or [dtype, shape, {low, high, unique}]")
    dtype_name, shape = value[0], value[1]
    if dtype_name not in DTYPES:
        raise p.fail(sub, field, f"unknown dtype '{dtype_name}'; known: {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all((type(d) is int and d >= 0) or d in dims for d in shape):
        raise p.fail(sub, field, f"shape must be a list of non-negative integers or names from `dims:` ({', '.join(dims) or 'none declared'})")
    options = value[2] if len(value) == 3 else {}
    if not isinstance(options, dict) or set(options) - {"low", "high", "unique"}:
        raise p.fail(sub, field, "tensor options are a mapping with low, high, unique")
    for bound in ("low", "high"):
        if bound in options and not (type(options[bound]) is int or options[bound] in dims):
            raise p.fail(sub, field, f"'{bound}' must be an integer or a name from `dims:`")
    return TensorSample(DTYPES[dtype_name], tuple(shape), options.get("low"), options.get("high"),
                        bool(options.get("unique", False)))


def resolve_dims(spec: OpSpec, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    dims = dict(spec.dims)
    dims.update(overrides or {})
    return dims
