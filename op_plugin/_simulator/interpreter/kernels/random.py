"""Random GE ops, drawn from the emulated NPU generator's (seed, offset) pair: StatelessRandomUniformV2,
StatelessRandomNormalV2, StatelessBernoulli, StatelessDropOutGenMask + DropOutDoMask, StatelessRandperm,
MultinomialWithReplacement.

TorchAir feeds every random op a seed (a Const, the generator's initial seed) and an offset (a
Data input advanced before each run); see ``op_plugin._simulator.npu.generator``. The numbers come from
``stream(seed, offset)``, torch's CPU generator seeded with a mix of the pair, not from
CANN's Philox: they never equal an NPU's or CPU eager's bit for bit. What the kernels guarantee is
the op's definition: shape, dtype, value range, distribution, and the same numbers for the same
(seed, offset), different ones for another offset.
"""
from __future__ import annotations

import torch

from ...._ge.values import ge_dtype_to_torch
from .common import check_dtype, fail, int_list
from ..registry import builtin_kernel

_MASK64 = (1 << 64) - 1


def _splitmix64(value: int) -> int:
    value = (value + 0x9E3779B97F4A7C15) & _MASK64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK64
    return value ^ (value >> 31)


def stream(seed: int, *offsets: int) -> torch.Generator:
    """A CPU generator whose numbers depend only on (seed, offsets): the same pair, the same numbers."""
    mixed = _splitmix64(int(seed) & _MASK64)
    for offset in offsets:
        mixed = _splitmix64(mixed ^ (int(offset) & _MASK64))
    return torch.Generator().manual_seed(mixed)



_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_SHAPE_DTYPES = (torch.int32, torch.int64)
_ALG_PHILOX, _ALG_AUTO_SELECT = 1, 3  # TensorFlow's RNG algorithm numbers (2 is ThreeFry)


def _shape(node, shape):
    check_dtype(node, "shape", shape, _SHAPE_DTYPES)
    dims = int_list(shape)
    if any(d < 0 for d in dims):
        fail(node, f"shape {dims} has a negative dim")
    return dims


def _scalar(node, what, tensor, dtypes=(torch.int64,)):
    check_dtype(node, what, tensor, dtypes)
    if tensor.numel() != 1:
        fail(node, f"{what} must hold one value, got shape {list(tensor.shape)}")
    return int(tensor.reshape(-1)[0].item())


def _key_counter_stream(node, key, counter, alg):
    """TF's stateless V2 inputs: key = [seed], counter = [high, offset] (TorchAir: [0, offset])."""
    check_dtype(node, "key", key, (torch.uint64,))
    check_dtype(node, "counter", counter, (torch.uint64,))
    algorithm = _scalar(node, "alg", alg, (torch.int32,))
    if algorithm not in (_ALG_PHILOX, _ALG_AUTO_SELECT):
        fail(node, f"alg {algorithm} is not supported (1 Philox or 3 auto-select)")
    if key.numel() != 1 or counter.numel() != 2:
        fail(node, f"key needs 1 value and counter 2, got {key.numel()} and {counter.numel()}")
    seed = int(key.reshape(-1)[0].item())
    high, offset = (int(v.item()) for v in counter.reshape(-1))
    return stream(seed, offset, high)


def _stateless_v2(draw):
    def kernel(inputs, attrs, node):
        shape, key, counter, alg = inputs
        dims = _shape(node, shape)
        dtype = ge_dtype_to_torch(attrs.get("dtype", 0), where=f"{node.type} dtype: ")
        if dtype not in _FLOATS:
            fail(node, f"dtype {dtype} is not in the prototype's output types")
        return [draw(dims, generator=_key_counter_stream(node, key, counter, alg), dtype=dtype)]

    return kernel


# uniform in [0, 1), drawn in the output dtype so that 16-bit rounding never reaches 1.0
builtin_kernel("StatelessRandomUniformV2")(_stateless_v2(torch.rand))
builtin_kernel("StatelessRandomNormalV2")(_stateless_v2(torch.randn))

_BERNOULLI_OUT = (torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64,
                  torch.uint64, torch.bool, torch.float16, torch.float32, torch.float64, torch.bfloat16)


@builtin_kernel("StatelessBernoulli")
def _stateless_bernoulli(inputs, attrs, node):
    """y[i] = 1 with probability prob[i] (prob broadcast to `shape`), else 0, in `dtype`."""
    shape, prob, seed, offset = inputs
    dims = _shape(node, shape)
    check_dtype(node, "prob", prob, (torch.float16, torch.float32, torch.float64))
    dtype = ge_dtype_to_torch(attrs.get("dtype", 0), where=f"{node.type} dtype: ")
    if dtype not in _BERNOULLI_OUT:
        fail(node, f"dtype {dtype} is not in the prototype's output types")
    try:
        p = torch.broadcast_to(prob.to(torch.float64), dims)
    except RuntimeError:
        fail(node, f"prob of shape {list(prob.shape)} does not broadcast to shape {dims}")
    if p.numel() and not bool(((p >= 0) & (p <= 1)).all()):
        fail(node, "prob must lie in [0, 1]")
    generator = stream(_scalar(node, "seed", seed), _scalar(node, "offset", offset))
    uniform = torch.rand(dims, generator=generator, dtype=torch.float64)
    return [(uniform < p).to(dtype)]


def _mask_bytes(numel):
    """CANN's dropout mask: one bit per element, padded to a multiple of 128 bits."""
    return (numel + 127) // 128 * 128 // 8


@builtin_kernel("StatelessDropOutGenMask")
def _stateless_dropout_gen_mask(inputs, attrs, node):
    """A bit mask keeping each of prod(shape) elements with probability `prob` (the keep probability).

    Element i is bit i % 8 (least significant first) of byte i // 8; the bytes are padded to a
    multiple of 16 with zero bits, as the NPU kernel sizes them (TorchAir's native_dropout meta).
    seed and seed1 are the low and high 64 bits of one 128-bit seed; offset is [high, low] counter.
    """
    shape, prob, seed, seed1, offset = inputs
    dims = _shape(node, shape)
    check_dtype(node, "prob", prob, (torch.float16, torch.float32, torch.bfloat16))
    keep = float(prob.reshape(-1)[0].item()) if prob.numel() == 1 else fail(node, "prob must hold one value")
    if not 0.0 <= keep <= 1.0:
        fail(node, f"prob (keep probability) {keep} is outside [0, 1]")
    low = _scalar(node, "seed", seed, (torch.int32, torch.int64))
    high = _scalar(node, "seed1", seed1, (torch.int32, torch.int64))
    counter = [0, 0]
    if offset is not None:
        check_dtype(node, "offset", offset, (torch.int64,))
        if offset.numel() != 2:
            fail(node, f"offset must hold 2 values, got {offset.numel()}")
        counter = int_list(offset)
    numel = 1
    for d in dims:
        numel *= d
    generator = stream(low, high, *counter)
    bits = torch.zeros(_mask_bytes(numel) * 8, dtype=torch.uint8)
    bits[:numel] = (torch.rand(numel, generator=generator, dtype=torch.float64) < keep).to(torch.uint8)
    weights = torch.tensor([1 << b for b in range(8)], dtype=torch.int32)
    return [(bits.reshape(-1, 8).to(torch.int32) * weights).sum(dim=1).to(torch.uint8)]


@builtin_kernel("DropOutDoMask")
def _dropout_do_mask(inputs, attrs, node):
    """y = x * mask_bit / keep_prob, element i reading bit i % 8 of mask byte i // 8."""
    x, mask, keep_prob = inputs
    check_dtype(node, "x", x, (torch.float32, torch.float16, torch.bfloat16))
    check_dtype(node, "mask", mask, (torch.uint8,))
    check_dtype(node, "keep_prob", keep_prob, (torch.float32, torch.float16))
    if keep_prob.numel() != 1:
        fail(node, "keep_prob must hold one value")
    if mask.numel() * 8 < x.numel():
        fail(node, f"mask has {mask.numel() * 8} bits for {x.numel()} elements")
    bits = (mask.reshape(-1, 1).to(torch.int32) >> torch.arange(8, dtype=torch.int32)) & 1
    keep_bits = bits.reshape(-1)[:x.numel()].reshape(x.shape).to(torch.float32)
    keep = keep_prob.float().reshape(())
    # keep_prob 0 drops everything (the NPU writes zeros rather than 0 * inf)
    scaled = x.float() * keep_bits / keep if float(keep) != 0.0 else torch.zeros_like(x, dtype=torch.float32)
    return [scaled.to(x.dtype)]


_RANDPERM_OUT = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8, torch.float16, torch.float32,
                 torch.float64)


@builtin_kernel("StatelessRandperm",
                unread_attrs={"layout": "a memory-layout hint (TorchAir sets 1); the permutation does not depend on it"})
def _stateless_randperm(inputs, attrs, node):
    """A random permutation of 0 .. n-1 in `dtype`."""
    n_input, seed, offset = inputs
    n = _scalar(node, "n", n_input)
    if n < 0:
        fail(node, f"n must be >= 0, got {n}")
    dtype = ge_dtype_to_torch(attrs.get("dtype", 9), where=f"{node.type} dtype: ")
    if dtype not in _RANDPERM_OUT:
        fail(node, f"dtype {dtype} is not in the prototype's output types")
    generator = stream(_scalar(node, "seed", seed), _scalar(node, "offset", offset))
    return [torch.randperm(n, generator=generator).to(dtype)]


@builtin_kernel("MultinomialWithReplacement")
def _multinomial(inputs, attrs, node):
    """numsamples category indices per row of x (1-D or 2-D, non-negative weights), with or without
    replacement. TorchAir never sets `replacement` (aten.multinomial's own flag is dropped), so
    compiled multinomial always samples without replacement, as the GE op's default says."""
    x, seed, offset = inputs
    check_dtype(node, "x", x, (torch.float16, torch.float32, torch.float64))
    if x.dim() not in (1, 2):
        fail(node, f"x must be 1-D or 2-D, got shape {list(x.shape)}")
    samples = attrs["numsamples"]
    replacement = attrs.get("replacement", False)
    categories = x.shape[-1]
    if samples <= 0 or (not replacement and samples > categories):
        fail(node, f"numsamples {samples} is invalid for {categories} categories (replacement={replacement})")
    weights = x.to(torch.float64)
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
        fail(node, "x must hold finite, non-negative weights")
    positive = (weights > 0).sum(dim=-1)
    if bool((positive == 0).any()):
        fail(node, "every row of x needs a positive weight")
    if not replacement and bool((positive < samples).any()):
        fail(node, f"without replacement every row needs {samples} categories of positive weight")
    generator = stream(_scalar(node, "seed", seed), _scalar(node, "offset", offset))
    return [torch.multinomial(weights, samples, replacement=replacement, generator=generator)]
