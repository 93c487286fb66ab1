"""The FX graph's shapes for the GE tensors TorchAir builds, recorded while it lowers, for the executor.

TorchAir leaves intermediate output descs without `shape`, and the `_meta` attr it writes there is
not the producing node's: a view op (`continguous_utils._get_npu_outputs_of_view_ops`) re-labels
its input's GE tensor with the view's meta, so after `layer_norm -> view` the LayerNorm output
claims the view's shape. The `_fx_tensor_name` attr (`fx2ge_converter._set_fx_tensor_names`) is
written once, right after the producing node's converter, and view ops never write it. So at that
moment the tensor's meta is the producing FX node's: it is recorded here, keyed by that name, with
symbolic sizes kept as sympy expressions. Placeholders are recorded by Data node name, so the
executor can bind each size symbol to the size of the input that carries it.

The records go on the graph's executor object (the simulator's `TorchNpuGraphBase`), which TorchAir
creates per GeGraph; nothing is added to the GE graph itself. The wrappers apply only to the
simulator's own TorchAir copy and only record: what TorchAir returns is unchanged.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

import sympy
import torch

Dim = Union[int, sympy.Expr]


@dataclass
class FxMetaRecord:
    """What the FX graph says about one GE graph: output shapes by `_fx_tensor_name`, and the shape
    (tensor) or value (SymInt, as a 0-d shape `None`) of each placeholder by Data node name."""

    outputs: dict[str, tuple[Dim, ...]] = field(default_factory=dict)
    placeholders: dict[str, tuple[Dim, ...] | Dim] = field(default_factory=dict)


def _dims(meta) -> tuple[Dim, ...] | None:
    if not isinstance(meta, torch.Tensor):
        return None
    return tuple(size.node.expr if isinstance(size, torch.SymInt) else int(size) for size in meta.size())


def _record_of(ge_graph) -> FxMetaRecord | None:
    from .native_stub import TorchNpuGraphBase

    executor = getattr(ge_graph, "_executor", None)
    if not isinstance(executor, TorchNpuGraphBase):
        return None
    if executor.fx_meta is None:
        executor.fx_meta = FxMetaRecord()
    return executor.fx_meta


def _ge_tensors(value):
    if isinstance(value, Mapping):
        for nested in value.values():
            yield from _ge_tensors(nested)
    elif isinstance(value, (list, tuple)):
        for nested in value:
            yield from _ge_tensors(nested)
    elif hasattr(value, "desc") and hasattr(value, "meta"):
        yield value


def install(torchair) -> None:
    """Wrap the two TorchAir functions that see each FX node's meta next to its GE tensors."""
    del torchair  # imported: its modules are in sys.modules
    from torchair._ge_concrete_graph import fx2ge_converter
    from torchair.ge._ge_graph import get_default_ge_graph

    if getattr(fx2ge_converter, "_op_plugin_fx_meta_installed", False):
        return
    set_names = fx2ge_converter._set_fx_tensor_names
    parse_input = fx2ge_converter.GeConcreteGraph.parse_input

    def recording_set_fx_tensor_names(ge_outputs, fx_tensor_prefix):
        set_names(ge_outputs, fx_tensor_prefix)
        record = _record_of(get_default_ge_graph())
        if record is None:
            return
        for tensor in _ge_tensors(ge_outputs):
            name = tensor.desc.attr["_fx_tensor_name"].s.decode() if "_fx_tensor_name" in tensor.desc.attr else None
            dims = _dims(tensor.meta)
            if name and dims is not None:
                record.outputs[name] = dims

    def recording_parse_input(self, target, args, kwargs, meta_outputs):
        data = parse_input(self, target, args, kwargs, meta_outputs)
        record = _record_of(self.graph)
        node = getattr(data, "node", None)
        if record is not None and node is not None:
            if isinstance(meta_outputs, torch.SymInt):
                record.placeholders[node.name] = meta_outputs.node.expr
            elif (dims := _dims(meta_outputs)) is not None:
                record.placeholders[node.name] = dims
        return data

    fx2ge_converter._set_fx_tensor_names = recording_set_fx_tensor_names
    fx2ge_converter.GeConcreteGraph.parse_input = recording_parse_input
    fx2ge_converter._op_plugin_fx_meta_installed = True


# ---- a record as JSON data (npugraph's compile cache stores it): sympy expressions as trees of allow-listed
# ---- classes, rebuilt without parsing or evaluating any text

class UnserializableRecord(ValueError):
    """A size expression uses a class outside the allow-list."""


def _sympy_classes() -> dict:
    from torch.utils._sympy import functions

    allowed = {cls.__name__: cls for cls in (sympy.Add, sympy.Mul, sympy.Pow, sympy.Max, sympy.Min)}
    for name in ("FloorDiv", "CeilDiv", "CleanDiv", "ModularIndexing", "Mod", "PythonMod", "Max", "Min",
                 "PowByNatural", "IntTrueDiv", "FloorToInt", "CeilToInt", "TruncToInt", "Identity"):
        if hasattr(functions, name):
            allowed[name] = getattr(functions, name)
    return allowed


def _expr_to_data(expr) -> object:
    if isinstance(expr, int):
        return expr
    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Rational):
        return {"q": [int(expr.p), int(expr.q)]}
    if isinstance(expr, sympy.Symbol):
        return {"s": expr.name, "a": {k: bool(v) for k, v in expr.assumptions0.items() if v is not None}}
    name = type(expr).__name__
    if name not in _sympy_classes():
        raise UnserializableRecord(f"a size expression uses {name}")
    return {"f": name, "x": [_expr_to_data(arg) for arg in expr.args]}


def _expr_from_data(data, symbols: dict):
    if isinstance(data, int):
        return data
    if "q" in data:
        return sympy.Rational(*data["q"])
    if "s" in data:
        key = (data["s"], tuple(sorted(data["a"].items())))
        if key not in symbols:
            symbols[key] = sympy.Symbol(data["s"], **data["a"])
        return symbols[key]
    return _sympy_classes()[data["f"]](*(_expr_from_data(arg, symbols) for arg in data["x"]))


def _dims_to_data(dims) -> object:
    if isinstance(dims, tuple):
        return {"t": [_expr_to_data(d) for d in dims]}
    return {"e": _expr_to_data(dims)}


def _dims_from_data(data, symbols):
    if "t" in data:
        return tuple(_expr_from_data(d, symbols) for d in data["t"])
    return _expr_from_data(data["e"], symbols)


def record_to_data(record: FxMetaRecord | None) -> dict | None:
    if record is None:
        return None
    return {"outputs": {name: _dims_to_data(dims) for name, dims in record.outputs.items()},
            "placeholders": {name: _dims_to_data(dims) for name, dims in record.placeholders.items()}}


def record_from_data(data: dict | None) -> FxMetaRecord | None:
    if data is None:
        return None
    symbols: dict = {}
    return FxMetaRecord(
        outputs={name: _dims_from_data(dims, symbols) for name, dims in data["outputs"].items()},
        placeholders={name: _dims_from_data(dims, symbols) for name, dims in data["placeholders"].items()})
