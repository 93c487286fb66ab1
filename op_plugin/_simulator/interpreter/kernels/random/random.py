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
from ...registry import ge_kernel, refuse
from ..common import attr_dtype, int_list

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
_I64 = (torch.int64,)
_ALG_PHILOX, _ALG_AUTO_SELECT = 1, 3  # TensorFlow's RNG algorithm numbers (2 is ThreeFry)


def _shape(shape):
    dims = int_list(shape)
    if any(d < 0 for d in dims):
        refuse(f"shape {dims} has a negative dim")
    return dims


def _scalar(what, tensor):
    if tensor.numel() != 1:
        refuse(f"{what} must hold one value, got shape {list(tensor.shape)}")
    return int(tensor.reshape(-1)[0].item())


def _out_dtype(dtype, allowed):
    """The `dtype` attr (a GE-enum number) as a torch dtype the prototype's output takes."""
    out = attr_dtype("dtype", dtype)
    if out not in allowed:
        refuse(f"dtype {out} is not in the prototype's output types")
    return out


def _key_counter_stream(key, counter, alg):
    """TF's stateless V2 inputs: key = [seed], counter = [high, offset] (TorchAir: [0, offset])."""
    algorithm = _scalar("alg", alg)
    if algorithm not in (_ALG_PHILOX, _ALG_AUTO_SELECT):
        refuse(f"alg {algorithm} is not supported (1 Philox or 3 auto-select)")
    if key.numel() != 1 or counter.numel() != 2:
        refuse(f"key needs 1 value and counter 2, got {key.numel()} and {counter.numel()}")
    seed = int(key.reshape(-1)[0].item())
    high, offset = (int(v.item()) for v in counter.reshape(-1))
    return stream(seed, offset, high)


_V2_INPUTS = {"shape": _SHAPE_DTYPES, "key": (torch.uint64,), "counter": (torch.uint64,), "alg": (torch.int32,)}


@ge_kernel("StatelessRandomUniformV2", accepts=_V2_INPUTS)
def stateless_random_uniform_v2(shape, key, counter, alg, *, dtype):
    """Uniform in [0, 1), drawn in the output dtype so that 16-bit rounding never reaches 1.0."""
    dims = _shape(shape)
    out = _out_dtype(dtype, _FLOATS)
    return torch.rand(dims, generator=_key_counter_stream(key, counter, alg), dtype=out)


@ge_kernel("StatelessRandomNormalV2", accepts=_V2_INPUTS)
def stateless_random_normal_v2(shape, key, counter, alg, *, dtype):
    dims = _shape(shape)
    out = _out_dtype(dtype, _FLOATS)
    return torch.randn(dims, generator=_key_counter_stream(key, counter, alg), dtype=out)


_BERNOULLI_OUT = (torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64,
                  torch.uint64, torch.bool, torch.float16, torch.float32, torch.float64, torch.bfloat16)


@ge_kernel("StatelessBernoulli", accepts={"shape": _SHAPE_DTYPES, "prob": (torch.float16, torch.float32, torch.float64),
                                          "seed": _I64, "offset": _I64})
def stateless_bernoulli(shape, prob, seed, offset, *, dtype):
    """y[i] = 1 with probability prob[i] (prob broadcast to `shape`), else 0, in `dtype`."""
    dims = _shape(shape)
    out = _out_dtype(dtype, _BERNOULLI_OUT)
    try:
        p = torch.broadcast_to(prob.to(torch.float64), dims)
    except RuntimeError:
        refuse(f"prob of shape {list(prob.shape)} does not broadcast to shape {dims}")
    if p.numel() and not bool(((p >= 0) & (p <= 1)).all()):
        refuse("prob must lie in [0, 1]")
    generator = stream(_scalar("seed", seed), _scalar("offset", offset))
    uniform = torch.rand(dims, generator=generator, dtype=torch.float64)
    return (uniform < p).to(out)


def _mask_bytes(numel):
    """CANN's dropout mask: one bit per element, padded to a multiple of 128 bits."""
    return (numel + 127) // 128 * 128 // 8


@ge_kernel("StatelessDropOutGenMask", accepts={
    "shape": _SHAPE_DTYPES, "prob": (torch.float16, torch.float32, torch.bfloat16),
    "seed": (torch.int32, torch.int64), "seed1": (torch.int32, torch.int64), "offset": _I64})
def stateless_dropout_gen_mask(shape, prob, seed, seed1, offset):
    """A bit mask keeping each of prod(shape) elements with probability `prob` (the keep probability).

    Element i is bit i % 8 (least significant first) of byte i // 8; the bytes are padded to a
    multiple of 16 with zero bits, as the NPU kernel sizes them (TorchAir's native_dropout meta).
    seed and seed1 are the low and high 64 bits of one 128-bit seed; offset is [high, low] counter.
    """
    dims = _shape(shape)
    if prob.numel() != 1:
        refuse("prob must hold one value")
    keep = float(prob.reshape(-1)[0].item())
    if not 0.0 <= keep <= 1.0:
        refuse(f"prob (keep probability) {keep} is outside [0, 1]")
    low = _scalar("seed", seed)
    high = _scalar("seed1", seed1)
    counter = [0, 0]
    if offset is not None:
        if offset.numel() != 2:
            refuse(f"offset must hold 2 values, got {offset.numel()}")
        counter = int_list(offset)
    numel = 1
    for d in dims:
        numel *= d
    generator = stream(low, high, *counter)
    bits = torch.zeros(_mask_bytes(numel) * 8, dtype=torch.uint8)
    bits[:numel] = (torch.rand(numel, generator=generator, dtype=torch.float64) < keep).to(torch.uint8)
    weights = torch.tensor([1 << b for b in range(8)], dtype=torch.int32)
    return (bits.reshape(-1, 8).to(torch.int32) * weights).sum(dim=1).to(torch.uint8)


@ge_kernel("DropOutDoMask", accepts={"x": (torch.float32, torch.float16, torch.bfloat16), "mask": (torch.uint8,),
                                     "keep_prob": (torch.float32, torch.float16)})
def dropout_do_mask(x, mask, keep_prob):
    """y = x * mask_bit / keep_prob, element i reading bit i % 8 of mask byte i // 8."""
    if keep_prob.numel() != 1:
        refuse("keep_prob must hold one value")
    if mask.numel() * 8 < x.numel():
        refuse(f"mask has {mask.numel() * 8} bits for {x.numel()} elements")
    bits = (mask.reshape(-1, 1).to(torch.int32) >> torch.arange(8, dtype=torch.int32)) & 1
    keep_bits = bits.reshape(-1)[:x.numel()].reshape(x.shape).to(torch.float32)
    keep = keep_prob.float().reshape(())
    # keep_prob 0 drops everything (the NPU writes zeros rather than 0 * inf)
    scaled = x.float() * keep_bits / keep if float(keep) != 0.0 else torch.zeros_like(x, dtype=torch.float32)
    return scaled.to(x.dtype)


_RANDPERM_OUT = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8, torch.float16, torch.float32,
                 torch.float64)


@ge_kernel("StatelessRandperm", accepts={"n": _I64, "seed": _I64, "offset": _I64},
           layout_only={"layout": "a memory-layout hint (TorchAir sets 1); the permutation does not depend on it"})
def stateless_randperm(n, seed, offset, *, dtype):
    """A random permutation of 0 .. n-1 in `dtype`."""
    count = _scalar("n", n)
    if count < 0:
        refuse(f"n must be >= 0, got {count}")
    out = _out_dtype(dtype, _RANDPERM_OUT)
    generator = stream(_scalar("seed", seed), _scalar("offset", offset))
    return torch.randperm(count, generator=generator).to(out)


@ge_kernel("MultinomialWithReplacement", accepts={"x": (torch.float16, torch.float32, torch.float64),
                                                  "seed": _I64, "offset": _I64})
def multinomial_with_replacement(x, seed, offset, *, numsamples, replacement):
    """numsamples category indices per row of x (1-D or 2-D, non-negative weights), with or without
    replacement. TorchAir never sets `replacement` (aten.multinomial's own flag is dropped), so
    compiled multinomial always samples without replacement, as the GE op's default says."""
    if x.dim() not in (1, 2):
        refuse(f"x must be 1-D or 2-D, got shape {list(x.shape)}")
    samples = numsamples
    categories = x.shape[-1]
    if samples <= 0 or (not replacement and samples > categories):
        refuse(f"numsamples {samples} is invalid for {categories} categories (replacement={replacement})")
    weights = x.to(torch.float64)
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
        refuse("x must hold finite, non-negative weights")
    positive = (weights > 0).sum(dim=-1)
    if bool((positive == 0).any()):
        refuse("every row of x needs a positive weight")
    if not replacement and bool((positive < samples).any()):
        refuse(f"without replacement every row needs {samples} categories of positive weight")
    generator = stream(_scalar("seed", seed), _scalar("offset", offset))
    return torch.multinomial(weights, samples, replacement=replacement, generator=generator)
