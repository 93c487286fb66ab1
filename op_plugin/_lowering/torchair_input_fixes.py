"""A host-independent fix of TorchAir's handling of graph inputs that are tensor subclasses (DTensor)
or opaque objects (DeviceMesh), applied by `install_converters` on both hosts, so the graph a CPU
host lowers is the graph an Ascend host lowers.

TorchAir bugs
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
from typing import Any


def install(torchair: Any) -> None:
    """The fixes above, on `torchair` (idempotent)."""
    _install_subclass_input_fixes(torchair)


_NOTHING = object()


def flattened_input_attrs(example_inputs, plain_attrs: dict) -> dict:
    """TorchAir's per-input attributes (`plain_attrs`, keyed by dynamo position from the end)
    re-keyed by position from the end among AOT's flattened inputs, on every tensor each input
    flattens to."""
    import torch
    from torch._functorch._aot_autograd.descriptors import PlainAOTInput
    from torch._functorch._aot_autograd.subclass_utils import (
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


def _install_subclass_input_fixes(torchair: Any) -> None:
    import torch

    # TorchAir's own modules, reached through the package handed in (its import loads them); a TorchAir
    # without them (another version's layout) has not these functions to fix: it is left as it is.
    try:
        npu_fx_compiler = torchair.npu_fx_compiler
        GeConcreteGraph = torchair._ge_concrete_graph.fx2ge_converter.GeConcreteGraph
        is_sym = torchair.ge._ge_graph.is_sym
        npu_fx_compiler._get_inputs_custom_attr  # noqa: B018
    except AttributeError:
        return

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
