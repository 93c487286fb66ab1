"""Validation of a whole YAML document into `OpSpec`s; the first problem raises YamlSpecError.

Everything a YAML entry can get wrong is found here, before anything is registered, and reported
with file, line, op and field (`OpParser.fail`). The `ge:` mapping and `samples:` have their own
modules (`parse_ge`, `parse_samples`).
"""
from __future__ import annotations

from typing import Any

import torch

from .._base.errors import YamlSpecError
from .dtypes import DTYPES, is_dtype_name
from .model import DEFAULT_NAMESPACE, DimSize, DtypeRule, OpSpec, OutputSpec
from .names import namespace_problem, op_name_problem
from .op_parser import IDENTIFIER, OpParser
from .parse_ge import parse_aclnn, parse_ge
from .parse_samples import parse_samples
from .schema import ArgKind, Schema, SchemaParseError, parse_schema
from .size_expr import SizeExprError, compile_size_expr
from .yaml_source import LocatedDocument

MAX_SAMPLE_DIM = 1 << 16
_FILE_FIELDS = ("namespace", "ops")
_OP_FIELDS = ("func", "doc", "outputs", "dtypes", "ge", "aclnn", "dims", "samples")


def parse_document(doc: LocatedDocument) -> tuple[OpSpec, ...]:
    """Validate a whole document; the first problem raises YamlSpecError."""
    data = doc.data
    if not isinstance(data, dict):
        raise YamlSpecError(doc.location(()), "the file must be a mapping with an `ops:` list")
    _reject_unknown(doc, (), data, _FILE_FIELDS, None)
    namespace = data.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not IDENTIFIER.match(namespace):
        raise YamlSpecError(doc.location(("namespace",), field="namespace"),
                            f"{_short_repr(namespace)} is not a valid namespace")
    problem = namespace_problem(namespace)
    if problem:
        raise YamlSpecError(doc.location(("namespace",), field="namespace"), problem)
    ops = data.get("ops")
    if not isinstance(ops, list) or not ops:
        raise YamlSpecError(doc.location(("ops",), field="ops"), "expected a non-empty list of ops")
    specs = [_parse_op_located(doc, namespace, i, entry) for i, entry in enumerate(ops)]
    seen: dict[str, OpSpec] = {}
    for spec in specs:
        if spec.qualname in seen:
            raise YamlSpecError(spec.location.with_field("func"),
                                f"{spec.qualname} is defined twice in this file "
                                f"(first at line {seen[spec.qualname].location.line})")
        seen[spec.qualname] = spec
    return tuple(specs)


def _parse_op_located(doc: LocatedDocument, namespace: str, index: int, entry: Any) -> OpSpec:
    """`_parse_op`, with any unexpected failure turned into an error at the op's line (as torchgen's
    `context` does), the original exception chained: a gap in the validator still says where."""
    try:
        return _parse_op(doc, namespace, index, entry)
    except YamlSpecError:
        raise
    except Exception as exc:
        func = entry.get("func") if isinstance(entry, dict) else None
        op = func.split("(", 1)[0].strip() if isinstance(func, str) else None
        raise YamlSpecError(doc.location(("ops", index), op),
                            f"cannot validate this op: {type(exc).__name__}: {exc} (a gap in op_plugin's validator; "
                            "the message above is the underlying error)") from exc


def _parse_op(doc: LocatedDocument, namespace: str, index: int, entry: Any) -> OpSpec:
    path = ("ops", index)
    p = OpParser(doc, path, None)
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
    problem = op_name_problem(schema.name)
    if problem:
        raise p.fail(("func",), "func", problem)
    _check_schema_supported(p, schema)
    doc_text = entry.get("doc", "")
    if not isinstance(doc_text, str) or "\n" in doc_text.strip():
        raise p.fail(("doc",), "doc", "`doc:` must be one line of text")
    dims = _parse_dims(p, entry.get("dims", {}))
    return OpSpec(
        namespace=namespace, schema=schema, doc=doc_text.strip(),
        outputs=_parse_outputs(p, schema, entry),
        dtypes=_parse_dtypes(p, schema, entry.get("dtypes")),
        ge=parse_ge(p, schema, entry["ge"]) if "ge" in entry else None,
        dims=dims,
        samples=parse_samples(p, schema, dict(dims), entry.get("samples", [])),
        location=doc.location(path + ("func",), p.op),
        aclnn=parse_aclnn(p, entry["aclnn"]) if "aclnn" in entry else None,
    )


def _reject_unknown(doc: LocatedDocument, path: tuple, mapping: dict, allowed: tuple, op: str | None) -> None:
    for key in mapping:
        if key not in allowed:
            raise YamlSpecError(doc.location(path + (key,), op, str(key)),
                                f"unknown field '{key}'; allowed fields: {', '.join(allowed)}")


def _check_schema_supported(p: OpParser, schema: Schema) -> None:
    for arg in schema.args:
        if arg.kind is ArgKind.OTHER:
            raise p.fail(("func",), "func", f"argument '{arg.name}' has a type op_plugin does not support yet "
                         "(supported: Tensor, Tensor?, Tensor[], int, SymInt, int[], SymInt[], float, float[], "
                         "bool, bool[], str, ScalarType, Scalar)")
    if not schema.returns:
        return
    for i, ret in enumerate(schema.returns):
        if not ret.is_tensor:
            raise p.fail(("func",), "func", f"return {i} is not a Tensor; ops return tensors")
        if ret.alias_set and schema.aliased_arg(ret) is None:
            raise p.fail(("func",), "func",
                         f"return {i} aliases '({ret.alias_set}!)' but no argument has that annotation")
    mutated = [a for a in schema.args if a.mutated]
    if any(a.kind is not ArgKind.TENSOR for a in mutated):
        raise p.fail(("func",), "func", "only plain Tensor arguments can be mutated (Tensor(a!))")
    if any(r.alias_set for r in schema.returns) and schema.args and not schema.args[0].mutated:
        raise p.fail(("func",), "func", "an op returning an alias must mutate its first argument and return it "
                     "(in-place convention, e.g. `my_op_(Tensor(a!) self, ...) -> Tensor(a!)`)")


def _parse_dims(p: OpParser, raw: Any) -> tuple[DimSize, ...]:
    if not isinstance(raw, dict):
        raise p.fail(("dims",), "dims", "expected a mapping of size names to integers, e.g. {B: 4, S: 8}")
    for name, value in raw.items():
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            raise p.fail(("dims", name), f"dims.{name}", "dim names must be identifiers")
        if type(value) is not int or not 2 <= value <= MAX_SAMPLE_DIM:
            # 0 and 1 specialise under torch.compile, so they make poor dynamic-shape samples; the
            # upper bound keeps generated sample tensors small.
            raise p.fail(("dims", name), f"dims.{name}", f"expected an integer from 2 to {MAX_SAMPLE_DIM}, "
                         f"got {_short_repr(value)}")
    return tuple(DimSize(name, value) for name, value in raw.items())


def _parse_outputs(p: OpParser, schema: Schema, entry: dict) -> tuple[OutputSpec, ...] | None:
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
    return tuple(_parse_output(p, schema, i, item, ret)
                 for i, (item, ret) in enumerate(zip(raw, schema.returns, strict=True)))


def _parse_output(p: OpParser, schema: Schema, i: int, item: Any, ret) -> OutputSpec:
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
        if not (arg.kind.is_tensor or arg.kind is ArgKind.SCALAR_TYPE):
            raise p.fail(sub + ("dtype",), f"{field}.dtype", f"argument '{dtype_value}' is of type {arg.kind.value}: "
                         "an output dtype comes from a tensor argument or a ScalarType argument")
        return OutputSpec(size, dtype_value, None, None)
    if is_dtype_name(dtype_value):
        return OutputSpec(size, None, DTYPES[dtype_value], None)
    raise p.fail(sub + ("dtype",), f"{field}.dtype", f"'{dtype_value}' is neither a tensor argument nor a dtype "
                 f"({', '.join(DTYPES)})")


def _parse_dtype_list(p: OpParser, sub: tuple, field: str, raw: Any) -> frozenset[torch.dtype]:
    if not isinstance(raw, list) or not raw:
        raise p.fail(sub, field, "expected a non-empty list of dtype names")
    for i, name in enumerate(raw):
        if not is_dtype_name(name):
            raise p.fail(sub + (i,), field, f"unknown dtype '{name}'; known: {', '.join(DTYPES)}")
    return frozenset(DTYPES[n] for n in raw)


def _parse_dtypes(p: OpParser, schema: Schema, raw: Any) -> tuple[DtypeRule, ...]:
    if raw is None:
        return ()
    if isinstance(raw, list):  # one list for every tensor argument
        allowed = _parse_dtype_list(p, ("dtypes",), "dtypes", raw)
        return tuple(DtypeRule(a.name, allowed) for a in schema.tensor_args)
    if not isinstance(raw, dict):
        raise p.fail(("dtypes",), "dtypes", "expected a list of dtype names, or a mapping argument -> list")
    rules = []
    for name, names in raw.items():
        arg = schema.arg(name)
        if arg is None or not arg.kind.is_tensor:
            raise p.fail(("dtypes", name), f"dtypes.{name}", f"'{name}' is not a tensor argument of the op")
        rules.append(DtypeRule(name, _parse_dtype_list(p, ("dtypes", name), f"dtypes.{name}", names)))
    return tuple(rules)


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
