"""Contained fixes to the simulator's own copy of TorchAir.

1. Unique node names in O(1), changing no byte of the graphs it builds.
`GeGraph.next_unique_name` tests every candidate node name with `name in self.op_name_list`, a
list: lowering a graph of N nodes costs O(N^2) (per-node lowering time at 20,000 nodes is ~1.8x
that at 100). Here the list is replaced, on first use, by a list that also keeps a set of its
items, so the same function runs with O(1) membership and produces the same names in the same
order (tests/simulator/test_torchair_fixes.py compares whole graphs with and without the fix).
Upstream fix (reported in docs/benchmarks.md): keep a set beside `op_name_list` in TorchAir itself.

2. Graph inputs that are tensor subclasses (DTensor) or opaque objects (DeviceMesh). TorchAir bugs
that fail the same way on an Ascend host (the code is host-independent Python), so a DTensor
tensor-parallel model fails in GE mode there too; with TorchAir's code as it is, no graph of plain
tensor and SymInt inputs changes (tests/distributed/test_dtensor.py, docs/distributed.md):

* `npu_fx_compiler._get_inputs_custom_attr` keys each dynamo input's attributes (parameter,
  static input, dim gears) by its position counted from the end, and `_set_inputs_custom_attr` sets
  them on AOT's inputs at the same position. AOT flattens a subclass input into several (a DTensor
  into its local tensor and its DeviceMesh, an opaque object, and with dynamic shapes the symbolic
  sizes), so the positions shift and TorchAir sets `_dynamo_static_input_type` on a DeviceMesh:
  "Tried to call __setattr__ ... on a FakeScriptObject". Fixed: the positions are counted in AOT's
  flattening (torch's own `unwrap_tensor_subclasses`), and the attributes go to every tensor a
  subclass input flattens to (a DTensor parameter's local tensor is the parameter on the device).
* `GeConcreteGraph.parse_input` skips a placeholder that is neither a tensor nor a SymInt (the
  DeviceMesh) but then binds every later GE input to the FX argument numbered like its GE `Data`
  index, so the executor is handed the DeviceMesh as a tensor ("object of type 'DeviceMesh' has no
  len()" here; on an NPU the runtime's input check). Fixed: each `Data` keeps its GE index and is
  bound to its own FX argument (its input function, the size/stride assert, the symbol table and
  the node's name).
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
    """The fixes above, on the simulator's TorchAir (idempotent)."""
    del torchair
    _install_indexed_names()
    _install_subclass_input_fixes()


def _install_indexed_names() -> None:
    """Give every GeGraph an indexed `op_name_list` before its first unique-name lookup."""
    from torchair.ge._ge_graph import GeGraph  # pylint: disable=import-outside-toplevel

    original = GeGraph.next_unique_name
    if getattr(original, "_op_plugin_indexed", False):
        return

    @functools.wraps(original)
    def next_unique_name(self, name, op):
        if type(self.op_name_list) is list:  # noqa: E721  (exactly TorchAir's plain list)
            self.op_name_list = IndexedNames(self.op_name_list)
        return original(self, name, op)

    next_unique_name._op_plugin_indexed = True
    next_unique_name._op_plugin_original = original
    GeGraph.next_unique_name = next_unique_name


_NOTHING = object()


def flattened_input_attrs(example_inputs, plain_attrs: dict) -> dict:
    """TorchAir's per-input attributes (`plain_attrs`, keyed by dynamo position from the end)
    re-keyed by position from the end among AOT's flattened inputs, on every tensor each input
    flattens to."""
    import torch  # pylint: disable=import-outside-toplevel
    from torch._functorch._aot_autograd.descriptors import PlainAOTInput  # pylint: disable=import-outside-toplevel
    from torch._functorch._aot_autograd.subclass_utils import (  # pylint: disable=import-outside-toplevel
        unwrap_tensor_subclasses,
    )

    flattened: dict = {}
    from_end = 0
    for index in range(len(example_inputs) - 1, -1, -1):
        items, _ = unwrap_tensor_subclasses([example_inputs[index]], [PlainAOTInput(index)], append_symints=True)
        from_end += len(items)
        attrs = plain_attrs.get(index - len(example_inputs))
        if not attrs:
            continue
        if len(items) > 1 and "dim_gears" in attrs:
            raise NotImplementedError(
                f"npugraph: input {index} is a tensor subclass ({type(example_inputs[index]).__name__}) with dim "
                "gears; gears name the dims of the outer tensor, not of the tensors it flattens to: mark gears on "
                "plain tensor inputs only")
        for position, item in enumerate(items):
            if isinstance(item, torch.Tensor):
                flattened[position - from_end] = attrs
    return flattened


def _install_subclass_input_fixes() -> None:
    import torch  # pylint: disable=import-outside-toplevel
    from torchair import npu_fx_compiler  # pylint: disable=import-outside-toplevel
    from torchair._ge_concrete_graph.fx2ge_converter import GeConcreteGraph  # pylint: disable=import-outside-toplevel
    from torchair.ge._ge_graph import is_sym  # pylint: disable=import-outside-toplevel

    get_attrs = npu_fx_compiler._get_inputs_custom_attr
    if not getattr(get_attrs, "_op_plugin_fixed", False):
        @functools.wraps(get_attrs)
        def get_inputs_custom_attr(example_inputs):
            return flattened_input_attrs(example_inputs, get_attrs(example_inputs))

        get_inputs_custom_attr._op_plugin_fixed = True
        npu_fx_compiler._get_inputs_custom_attr = get_inputs_custom_attr

    parse_input = GeConcreteGraph.parse_input
    if getattr(parse_input, "_op_plugin_fixed", False):
        return

    @functools.wraps(parse_input)
    def parse_input_bound_to_its_argument(self, target, args, kwargs, meta_outputs):
        fx_index, ge_index = len(self._fx_input_names), self.graph.num_inputs
        if fx_index == ge_index or not (is_sym(meta_outputs) or isinstance(meta_outputs, torch.Tensor)):
            return parse_input(self, target, args, kwargs, meta_outputs)
        sources = self.arg_pos_to_source
        if sources is not None:  # TorchAir names the Data after source [ge_index]: give it this input's
            self.arg_pos_to_source = list(sources[:ge_index]) + list(sources[fx_index:fx_index + 1])
        shadowed = self._all_meta_tensor_input.get(ge_index, _NOTHING)  # an earlier input's, keyed by its FX index
        try:
            data = parse_input(self, target, args, kwargs, meta_outputs)
        finally:
            self.arg_pos_to_source = sources
        self.graph.named_inputs_info[data.node.name].func.fx_input_idx = fx_index
        if is_sym(meta_outputs):
            self._all_sym_input_idx[meta_outputs.node.expr] = fx_index
        else:
            self._all_meta_tensor_input[fx_index] = self._all_meta_tensor_input.pop(ge_index)
            if shadowed is not _NOTHING:
                self._all_meta_tensor_input[ge_index] = shadowed
        return data

    parse_input_bound_to_its_argument._op_plugin_fixed = True
    GeConcreteGraph.parse_input = parse_input_bound_to_its_argument
