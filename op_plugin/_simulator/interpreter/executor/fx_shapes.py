"""Intermediate shapes from the FX graph: each GE node output TorchAir names with `_fx_tensor_name`
must have the shape the FX node's meta says, with its size symbols bound to this call's inputs.

The record comes from `op_plugin._simulator.hosting.fx_meta` (what the FX graph said, by name). A symbol
is bound from a Data node whose placeholder size is that bare symbol (or from a SymInt
placeholder); a dim whose expression keeps an unbound symbol (an unbacked size, or a placeholder
TorchAir dropped) matches any size, but the rank is always checked. Expected shapes are worked out
once per distinct binding, so a steady call pays a tuple build and a dict lookup.
"""
from __future__ import annotations

from typing import NamedTuple

import sympy

from .checks import GeExecutionError


_MAX_BINDINGS = 256


class FxShape(NamedTuple):
    fx_name: str
    dims: tuple  # ints and sympy expressions


class _Binding(NamedTuple):
    data_index: int
    dim: int | None  # None: the input is the SymInt itself
    symbol: sympy.Symbol


class FxShapes:
    """Per graph: which Data inputs bind which symbols, and the expected shape of each named output."""

    def __init__(self, record, ops):
        self.bindings: list[_Binding] = []
        for op in ops:
            if op.type not in ("Data", "RefData") or op.name not in record.placeholders:
                continue
            index = op.attr["index"].i
            meta = record.placeholders[op.name]
            if isinstance(meta, tuple):
                self.bindings += [_Binding(index, pos, dim) for pos, dim in enumerate(meta)
                                  if isinstance(dim, sympy.Symbol)]
            elif isinstance(meta, sympy.Symbol):
                self.bindings.append(_Binding(index, None, meta))
        self._cache: dict[tuple, _Resolver] = {}

    def for_output(self, record, desc) -> FxShape | None:
        if "_fx_tensor_name" not in desc.attr:
            return None
        name = desc.attr["_fx_tensor_name"].s.decode()
        dims = record.outputs.get(name)
        return None if dims is None else FxShape(name, dims)

    def resolver(self, inputs):
        """A function FxShape -> expected shape (ints, None for a dim that matches any size)."""
        values = tuple(_size_of(inputs[b.data_index], b.dim) for b in self.bindings)
        resolver = self._cache.get(values)
        if resolver is None:
            if len(self._cache) >= _MAX_BINDINGS:
                self._cache.clear()  # many distinct sizes: bounded memory beats a warm cache
            mapping = {}
            for binding, value in zip(self.bindings, values, strict=True):
                if value is not None:
                    mapping.setdefault(binding.symbol, sympy.Integer(value))
            resolver = self._cache[values] = _Resolver(mapping)
        return resolver


class _Resolver:
    """Expected shapes under one binding of the size symbols, each worked out on first use."""

    __slots__ = ("_mapping", "_memo")

    def __init__(self, mapping: dict):
        self._mapping = mapping
        self._memo: dict[FxShape, tuple] = {}

    def expected(self, fx: FxShape) -> tuple:
        shape = self._memo.get(fx)
        if shape is None:
            shape = self._memo[fx] = tuple(_evaluate(dim, self._mapping) for dim in fx.dims)
        return shape


def _size_of(value, dim):
    try:
        if dim is None:
            return int(value)
        return int(value.shape[dim])
    except (TypeError, ValueError, IndexError, AttributeError, RuntimeError):
        return None  # the Data check reports a malformed input; no binding from it


def _evaluate(dim, mapping) -> int | None:
    if isinstance(dim, int):
        return dim
    value = dim.xreplace(mapping)
    if value.free_symbols or not value.is_number:
        return None
    return int(value)


def check_fx_shape(tensor, expected: tuple, fx: FxShape, where: str) -> None:
    actual = tuple(tensor.shape)
    if len(actual) != len(expected) or any(want is not None and want != got
                                           for want, got in zip(expected, actual, strict=True)):
        shown = [("?" if want is None else want) for want in expected]
        raise GeExecutionError(
            f"{where}: shape mismatch with the FX graph, FX node {fx.fx_name!r} has shape {shown} "
            f"(symbolic: {list(map(str, fx.dims))}), the GE kernel produced {list(actual)}"
        )
