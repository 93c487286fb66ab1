"""Correction (`when="corrects"`; `registry`) of TorchAir's `aten.randint` lowering, and the checkpoint
function activation checkpointing replays it with (`rng_converters` looks in `CHECKPOINT_FUNCTIONS` before
TorchAir's own).

TorchAir's `randint_checkpoint` (ge_converter/aten/randint.py) scales a float32
`StatelessRandomUniformV2` draw by `high` as a Python int: `Mul(float32, Const(high))`, whose Const is
int64. GE does not promote (REG_OP Mul: x1 and x2 of one dtype), so every `torch.randint` graph is
refused, on an NPU as here (the scan of issue 34: an int scalar made an int64 Const beside a float
tensor). A float32 Const would not be right either: above 2**24 a float32 cannot hold `high`, and the
draw's 24 bits cannot reach every integer below it.

Corrected: the same stateless draw (TorchAir's key, counter and algorithm, its generator reservation of
10 counters, so the offsets TorchAir's graphs advance stay the same) in float64, the dtype REG_OP
StatelessRandomUniformV2 also lists, times `high` as a float64 (exact for every `high` up to 2**53),
`Floor`, then `Cast` to int64 and to the node's dtype. A float64 draw u <= 1 - 2**-53 times `high`
rounds below `high` (the gap `high * 2**-53` is at least half a unit in the last place below `high`),
so every value lies in [0, high), as aten's randint (native_functions.yaml: `[0, high)`). The numbers
cannot equal CPU eager's or an NPU's bit for bit (docs/npu-faithful-lowering.md: the simulator's random
stream); shape, dtype and range are aten's.
"""
from __future__ import annotations

import torch

from .cases import Support
from .registry import aten_converter
from .torchair_api import TorchAirApi

aten = torch.ops.aten
_PHILOX_COUNTERS = 10  # TorchAir's reservation for randint (randint_checkpoint)
_ALG_PHILOX = 1


def randint_draw(ta: TorchAirApi, high, size, generator=None, dtype=None, layout=None, device=None, pin_memory=None,
                 meta_outputs=None, rng_state=None):
    """((seed, offset), randint(high, size)): TorchAir's checkpoint-function form (`rng_state`: a
    saved int64 (seed, offset) pair to draw from again). `size` may hold symbolic sizes (TorchAir packs
    them into one int tensor, which StatelessRandomUniformV2's `shape` input takes; TorchAir's own
    converter refuses it)."""
    ge, graph = ta.ge, ta.graph
    data_type = graph.DataType
    if rng_state is None:
        seed, offset = graph.get_ge_rng_state(philox_num=_PHILOX_COUNTERS, gen=generator)
    else:
        seed, offset = ge.Unpack(rng_state, num=2, axis=0)
    key = ge.Unsqueeze(graph.Cast(seed, dst_type=data_type.DT_UINT64), axes=[0])
    counter = graph.Cast(ge.ConcatV2([graph.Const(0, dtype=data_type.DT_INT64), offset], 0, N=2),
                         dst_type=data_type.DT_UINT64)
    alg = graph.Const(_ALG_PHILOX, dtype=data_type.DT_INT32)
    draw = ge.StatelessRandomUniformV2(size, key, counter, alg, dtype=data_type.DT_DOUBLE)
    bound = ta.dtype_promote(high, target_dtype=data_type.DT_DOUBLE)
    values = graph.Cast(ge.Floor(ge.Mul(draw, bound)), dst_type=data_type.DT_INT64)
    out = meta_outputs.dtype if meta_outputs is not None else data_type.DT_INT64
    return (seed, offset), (values if out == data_type.DT_INT64 else graph.Cast(values, dst_type=out))


# TorchAir's own three cases (`randint(5, [30, 40, 50])`, ...) run against this correction too (op-plugin
# declared-cases: dtype, shape, two seeded runs equal); op_plugin's add a large high and a 1-D size.
@aten_converter(aten.randint.default, when="corrects", cases=[Support(1000, [64]), Support(2**31 - 1, [4, 5])])
def randint(ta: TorchAirApi, high, size, *, dtype=None, layout=None, device=None, pin_memory=None,
            meta_outputs=None):
    """`aten.randint(high, size)`: uniform integers in [0, high) (module docstring)."""
    if isinstance(high, int) and high <= 0:
        raise ValueError(f"aten.randint: high must be positive (the range is [0, high)), got {high}")
    _, result = randint_draw(ta, high, size, None, dtype, layout, device, pin_memory, meta_outputs)
    return result


# The random ops whose checkpoint function (TorchAir's `register_checkpoint_func` form) op_plugin replaces.
CHECKPOINT_FUNCTIONS = {aten.randint.default: randint_draw}
