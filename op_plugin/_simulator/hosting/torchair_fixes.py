"""Contained fixes to the simulator's own copy of TorchAir.

1. Unique node names in O(1), changing no byte of the graphs it builds.
`GeGraph.next_unique_name` tests every candidate node name with `name in self.op_name_list`, a
list: lowering a graph of N nodes costs O(N^2) (per-node lowering time at 20,000 nodes is ~1.8x
that at 100). Here the list is replaced, on first use, by a list that also keeps a set of its
items, so the same function runs with O(1) membership and produces the same names in the same
order (tests/simulator/test_torchair_fixes.py compares whole graphs with and without the fix).
Upstream fix (reported in docs/benchmarks.md): keep a set beside `op_name_list` in TorchAir itself.

The fix of TorchAir's handling of tensor-subclass graph inputs (DTensor) is host-independent and
applied on both hosts: `op_plugin/_lowering/torchair_input_fixes.py`.
"""
from __future__ import annotations

import functools


class IndexedNames(list):
    """A list of node names with set-speed `in`; only the list operations TorchAir uses keep the set."""

    def __init__(self, names=()):
        super().__init__(names)
        self._index = set(self)

    def __contains__(self, name) -> bool:
        return name in self._index

    def append(self, name) -> None:
        super().append(name)
        self._index.add(name)

    def _unsupported(self, *args, **kwargs):
        raise TypeError("IndexedNames supports append only; TorchAir's op_name_list never uses other mutations")

    extend = insert = remove = pop = clear = __setitem__ = __delitem__ = __iadd__ = _unsupported


def install(torchair) -> None:
    """The fix above, on the simulator's TorchAir (idempotent)."""
    del torchair
    _install_indexed_names()


def _install_indexed_names() -> None:
    """Give every GeGraph an indexed `op_name_list` before its first unique-name lookup."""
    from torchair.ge._ge_graph import GeGraph

    original = GeGraph.next_unique_name
    if getattr(original, "_op_plugin_indexed", False):
        return

    @functools.wraps(original)
    def next_unique_name(self, name, op):
        if type(self.op_name_list) is list:  # exactly TorchAir's plain list
            self.op_name_list = IndexedNames(self.op_name_list)
        return original(self, name, op)

    next_unique_name._op_plugin_indexed = True
    next_unique_name._op_plugin_original = original
    GeGraph.next_unique_name = next_unique_name
