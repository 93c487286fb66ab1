"""op_plugin's corrections of TorchAir's converters of the RNG-state higher-order ops that activation
checkpointing leaves in a graph (`when="corrects"`; `registry`).

`torch.utils.checkpoint` (and `gradient_checkpointing_enable()` in transformers) under torch.compile
functionalizes a random op in a checkpointed region as `run_and_save_rng_state(op, *args) ->
(state, result)` in the forward graph and `run_with_rng_state(state, op, *args)` in the
recomputation of the backward graph, so the recomputed dropout draws the forward's mask.
TorchAir's converters of both (ge_converter/higher_order/) call `get_checkpoint_func`, which their
module never imports (NameError on every host), and build the state as a GE `ConcatV2` of the two
0-d tensors seed and offset, where the graph's state is torch_npu's generator state,
`torch.npu.get_rng_state()`: uint8[16], the uint64 seed then the int64 offset, little-endian
(NPUGeneratorImpl, the layout of CUDA's).

Corrected: TorchAir's own per-op checkpoint functions (`fx2ge_converter.get_checkpoint_func`: the
random converters with a `rng_state` parameter), the state packed as `Reshape(Bitcast(Pack([seed,
offset]), uint8), [16])` and unpacked as `Bitcast(Reshape(state, [2, 8]), int64)`, the two int64
TorchAir's checkpoint functions `Unpack`. A random op that draws nothing (dropout with train=False)
saves 16 zero bytes, which its replay does not read.
"""
from __future__ import annotations

import functools
import importlib

import torch

from .random_corrections import CHECKPOINT_FUNCTIONS
from .registry import aten_converter
from .torchair_api import TorchAirApi

_STATE_BYTES = 16


def _checkpoint_func(ta: TorchAirApi, op):
    """op_plugin's checkpoint function of `op` where it corrects TorchAir's (`random_corrections`), else TorchAir's."""
    own = CHECKPOINT_FUNCTIONS.get(op)
    if own is not None:
        return functools.partial(own, ta)
    module = importlib.import_module(f"{ta.torchair.__name__}._ge_concrete_graph.fx2ge_converter")
    return module.get_checkpoint_func(op)


def _result_meta(meta_outputs):
    """The wrapped op's meta outputs (the node's outputs are (state, result))."""
    if isinstance(meta_outputs, (list, tuple)) and len(meta_outputs) == 2:
        return meta_outputs[1]
    return meta_outputs


@aten_converter(torch.ops.higher_order.run_and_save_rng_state, when="corrects")
def run_and_save_rng_state(ta: TorchAirApi, op, *args, meta_outputs=None, **kwargs):
    """`run_and_save_rng_state(op, *args) -> (state, op(*args))`: the state uint8[16] from the
    (seed, offset) pair the random op's converter draws."""
    ge, graph_module = ta.ge, ta.graph
    (seed, offset), result = _checkpoint_func(ta, op)(*args, meta_outputs=_result_meta(meta_outputs), **kwargs)
    if seed is None or offset is None:
        return graph_module.Const([0] * _STATE_BYTES, dtype=graph_module.DataType.DT_UINT8), result
    pair = ge.Pack([ta.dtype_promote(seed, target_dtype=graph_module.DataType.DT_INT64),
                    ta.dtype_promote(offset, target_dtype=graph_module.DataType.DT_INT64)], N=2, axis=0)
    state = ge.Reshape(ge.Bitcast(pair, type=graph_module.DataType.DT_UINT8),
                       graph_module.Const([_STATE_BYTES], dtype=graph_module.DataType.DT_INT64))
    return state, result


@aten_converter(torch.ops.higher_order.run_with_rng_state, when="corrects")
def run_with_rng_state(ta: TorchAirApi, rng_state, op, *args, meta_outputs=None, **kwargs):
    """`run_with_rng_state(state, op, *args) -> op(*args)` drawing from the saved (seed, offset)."""
    ge, graph_module = ta.ge, ta.graph
    int64 = graph_module.DataType.DT_INT64
    pair = ge.Bitcast(ge.Reshape(rng_state, graph_module.Const([2, _STATE_BYTES // 2], dtype=int64)), type=int64)
    _, result = _checkpoint_func(ta, op)(*args, meta_outputs=meta_outputs, **kwargs, rng_state=pair)
    return result
