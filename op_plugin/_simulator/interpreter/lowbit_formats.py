"""The MX (microscaling) block format as CANN's MX quant ops define it: a float8_e8m0 scale shared by a block
of elements, each element cast to fp4 (e2m1, e1m2) or fp8 (e4m3fn, e5m2).

Sources: hicann ops-nn ``quant/dynamic_mx_quant`` (README, aclnnDynamicMxQuant.md: formulas, emax table,
mxscale layout) and its arch35 kernels for what the docs leave implicit; torch's ``Float4_e2m1fn_x2.h``
for the nibble order. Shared by the GE kernels (``quant/mx_quant.py``, ``quant/swiglu_quant.py``,
``norm/rms_norm_quant.py``) and the CPU reference kernels of
torch_npu's ops (``npu/quant_mx.py``); it lives here because the interpreter may not import from ``npu``.

* scale_alg 0 (OCP): ``e = max over the block of the biased float32 exponent of |x|`` (zero and subnormals
  count 0); the e8m0 code is ``e - emax`` or 0 when ``e <= emax``; elements are multiplied by
  ``2^(127 - code)`` (0 when the code is 0: the kernels zero the block then) in float32 and rounded onto the
  element grid. A partial last block counts its missing elements as 0.
* scale_alg 1 (cuBLAS, fp8 only): ``S = max(amax, max_low_bound) * float32(1 / Amax(dtype))``; its float32
  exponent field E is raised by one when the mantissa is nonzero (normal S, E < 254) or above one half
  (subnormal S); code E, elements times ``2^(127 - E)``; an all-zero block gets code 0 and zero elements.
* scale_alg 2 ("dynamic dtype range", fp4 e2m1, dst_type_max 0/6 or 7; the arch35 kernel's bf16 arithmetic):
  amax of the block in bfloat16 (round half to even); its exponent field is raised by one when its 7-bit mantissa
  exceeds 0x40 (dst_type_max 0/6: amax > 1.5 * 2^e) or 0x60 (7: amax > 1.75 * 2^e); code = field - emax, 0
  (a zeroed block) when the field is below emax. The docs' ``S = amax / dst_type_max`` rounded up to a power
  of two, with the bf16 rounding of amax made explicit.
* element casts: fp8 round half to even and saturate to +-max (the kernels' ``SatMode::SAT`` cast); fp4 has
  no inf/NaN: rounded onto its grid with round_mode (rint half to even, round half away from zero, floor
  toward -inf), then saturated to +-max; the sign of a zero is kept (the kernels' -0 select).
* blocks holding inf/NaN are refused: CANN writes the NaN scale 0xFF and leaves the elements undefined.

Also the other low-bit storage helpers the kernels of several classes share: the MX argument checks and
``mx_along`` (quant, norm), int4 as ``torch.int4`` with its Bitcast packing (``as_int4``, ``pack_int4``,
``unpack_int4``: 8 per int32, element i in bits 4i..4i+3, as ops-nn's int4 goldens lay them out) and the fp8
saturating round-half-even cast ``fp8_saturating_rint`` (the kernels' ``CastTrait{SatMode::SAT,
RoundMode::CAST_RINT}``: a finite value beyond the format's largest, or +-inf, gives +-largest, NaN gives 0;
computed by formula, ``rint(v / q) * q`` with ``q = 2^(max(e, emin) - mantissa bits)``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import refuse


@dataclass(frozen=True)
class ElementFormat:
    name: str
    ge_number: int          # ge::DataType (dst_type attr)
    emax: int               # exponent of the largest normal (the docs' emax table)
    mantissa_bits: int
    min_normal_exp: int     # 1 - bias
    max_value: float
    torch_dtype: torch.dtype | None  # fp8 only; fp4 is carried as 4-bit codes


E2M1 = ElementFormat("float4_e2m1", 40, 2, 1, 0, 6.0, None)
E1M2 = ElementFormat("float4_e1m2", 41, 0, 2, 0, 1.75, None)
E4M3FN = ElementFormat("float8_e4m3fn", 36, 8, 3, -6, 448.0, torch.float8_e4m3fn)
E5M2 = ElementFormat("float8_e5m2", 35, 15, 2, -14, 57344.0, torch.float8_e5m2)
BY_GE_NUMBER = {f.ge_number: f for f in (E2M1, E1M2, E4M3FN, E5M2)}
# torch_npu's dst_type numbers (torch_npu_standin.py) -> ge::DataType
TORCH_NPU_DST = {296: 40, 297: 41, 291: 35, 292: 36, 23: 35, 24: 36}
ROUND_MODES = ("rint", "round", "floor")
# The fp4 grids by code 0-7 (sign is bit 3): OCP MX spec 5.3.3 for e2m1; e1m2 (bias 1) is 0.25 steps.
FP4_GRID = {E2M1: (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0), E1M2: tuple(i / 4 for i in range(8))}
# 1 / Amax(dtype) as the cuBLAS-scale kernels hold it: float32 bits 0x3b124925 and 0x37924925.
_INV_FP8_MAX = {E4M3FN: torch.tensor(0x3B124925, dtype=torch.int32).view(torch.float32),
                E5M2: torch.tensor(0x37924925, dtype=torch.int32).view(torch.float32)}


def element_format(what: str, dst_type: int) -> ElementFormat:
    fmt = BY_GE_NUMBER.get(int(dst_type))
    if fmt is None:
        refuse(f"{what}={dst_type} is not an MX element type (35 e5m2, 36 e4m3fn, 40 e2m1, 41 e1m2)")
    return fmt


def check_round_mode(fmt: ElementFormat, round_mode: str) -> None:
    allowed = ROUND_MODES if fmt.torch_dtype is None else ("rint",)
    if round_mode not in allowed:
        refuse(f"round_mode={round_mode!r}: {fmt.name} takes {', '.join(allowed)} (CANN's DynamicMxQuant doc)")


def _blocks_last(x: torch.Tensor, block: int) -> torch.Tensor:
    """x [..., n] as float32 [..., nb, block], the missing tail elements zero."""
    n = x.shape[-1]
    nb = -(-n // block)
    wide = torch.nn.functional.pad(x.float(), (0, nb * block - n))
    return wide.reshape(*x.shape[:-1], nb, block)


def _refuse_non_finite(blocks: torch.Tensor) -> None:
    if not bool(torch.isfinite(blocks).all()):
        refuse("x holds inf/NaN: CANN writes the NaN scale 0xFF and leaves that block's elements undefined")


def _exponent_field(t: torch.Tensor) -> torch.Tensor:
    return (t.float().view(torch.int32) >> 23) & 0xFF


def ocp_codes(blocks: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """scale_alg 0: e8m0 codes (int64) of float32 blocks [..., nb, block]."""
    field = _exponent_field(blocks.abs()).amax(dim=-1).long()
    return torch.where(field <= fmt.emax, torch.zeros_like(field), field - fmt.emax)


def cublas_codes(blocks: torch.Tensor, fmt: ElementFormat, max_low_bound: float) -> torch.Tensor:
    """scale_alg 1 (fp8): e8m0 codes (int64) of float32 blocks; 0 marks an all-zero block."""
    amax = blocks.abs().amax(dim=-1)
    scaled = torch.clamp(amax, min=float(max_low_bound)) * _INV_FP8_MAX[fmt]
    bits = scaled.view(torch.int32).long()
    field, mantissa = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    up = ((field > 0) & (field < 254) & (mantissa > 0)) | ((field == 0) & (mantissa > 0x400000))
    return torch.where(amax == 0, torch.zeros_like(field), field + up.long())


_DYNAMIC_RANGE_ADD = {0.0: 0x3F, 6.0: 0x3F, 7.0: 0x1F}   # the kernel's BF16_ADD_VALUE_MAN1 / MAN2


def dynamic_range_codes(blocks: torch.Tensor, fmt: ElementFormat, dst_type_max: float) -> torch.Tensor:
    """scale_alg 2: e8m0 codes (int64) of float32 blocks (fp4 e2m1, dst_type_max 0, 6 or 7)."""
    bits = blocks.abs().amax(dim=-1).to(torch.bfloat16).view(torch.int16).long() & 0xFFFF
    field = bits >> 7
    raised = ((bits + _DYNAMIC_RANGE_ADD[float(dst_type_max)]) & 0x7F80) >> 7
    return torch.where(field < fmt.emax, torch.zeros_like(field), torch.clamp(raised, min=fmt.emax) - fmt.emax)


def reciprocal(codes: torch.Tensor, zero_code_zeroes: bool) -> torch.Tensor:
    """float32 2^(127 - code); code 0 gives 0 when the kernel zeroes such a block (OCP), else 2^127."""
    recip = torch.pow(torch.tensor(2.0, dtype=torch.float64), 127 - codes.double()).float()
    return torch.where(codes == 0, torch.zeros_like(recip), recip) if zero_code_zeroes else recip


def round_to_grid(v: torch.Tensor, fmt: ElementFormat, round_mode: str) -> torch.Tensor:
    """float32 values onto fmt's grid (saturated), zeros keeping their sign; float64 result."""
    wide = v.double()
    exponent = torch.floor(torch.log2(wide.abs().clamp(min=2.0 ** -200)))
    quantum = torch.pow(2.0, torch.clamp(exponent, min=fmt.min_normal_exp) - fmt.mantissa_bits)
    steps = wide / quantum
    if round_mode == "rint":
        steps = torch.round(steps)
    elif round_mode == "round":
        steps = torch.sign(steps) * torch.floor(steps.abs() + 0.5)
    else:
        steps = torch.floor(steps)
    out = torch.clamp(steps * quantum, -fmt.max_value, fmt.max_value)
    return torch.where(out == 0, torch.copysign(torch.zeros_like(out), wide), out)


def fp4_codes(values: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """Grid values (float64, signed zeros) -> uint8 codes 0-15 (bit 3 the sign)."""
    grid = torch.tensor(FP4_GRID[fmt], dtype=torch.float64)
    index = torch.searchsorted(grid, values.abs().contiguous())
    if not bool((grid[index.clamp(max=7)] == values.abs()).all()):
        raise AssertionError("fp4_codes: a value off the grid")  # round_to_grid's contract
    return (index | (torch.signbit(values).long() << 3)).to(torch.uint8)


def fp4_values(codes: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """uint8 codes 0-15 -> float32 values."""
    grid = torch.tensor(FP4_GRID[fmt], dtype=torch.float32)
    magnitude = grid[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -magnitude, magnitude)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """[..., 2k] codes -> [..., k] uint8: element 2i in the low nibble, 2i+1 in the high one (torch's
    Float4_e2m1fn_x2.h layout, val1:val0 from MSB; the packing TorchAir's converters get from Bitcast)."""
    pairs = codes.reshape(*codes.shape[:-1], -1, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack((packed & 0xF, packed >> 4), dim=-1).flatten(-2)


@dataclass(frozen=True)
class MxResult:
    """values: x's shape, float64 on fmt's grid; codes: e8m0 per block, x's shape with the block axis -> nb."""

    values: torch.Tensor
    codes: torch.Tensor


def quantize_blocks(x: torch.Tensor, axis: int, block: int, fmt: ElementFormat, round_mode: str,
                    scale_alg: int = 0, max_low_bound: float = 0.0, dst_type_max: float = 0.0) -> MxResult:
    """MX-quantise x along `axis` in blocks of `block` elements."""
    moved = x.movedim(axis, -1)
    blocks = _blocks_last(moved, block)
    _refuse_non_finite(blocks)
    if scale_alg in (0, 2):
        codes = ocp_codes(blocks, fmt) if scale_alg == 0 else dynamic_range_codes(blocks, fmt, dst_type_max)
        recip = reciprocal(codes, zero_code_zeroes=True)
    else:
        codes = cublas_codes(blocks, fmt, max_low_bound)
        recip = torch.where(blocks.abs().amax(dim=-1) == 0, torch.zeros(()), reciprocal(codes, False))
    scaled = blocks * recip.unsqueeze(-1)   # float32, exact: recip is a power of two
    values = round_to_grid(scaled, fmt, round_mode).flatten(-2)[..., :moved.shape[-1]]
    return MxResult(values.movedim(-1, axis), codes.movedim(-1, axis))


def scale_layout(codes: torch.Tensor, axis: int) -> torch.Tensor:
    """e8m0 codes (block axis at `axis`) -> CANN's mxscale: that axis padded with 0 to even length, its pairs
    moved to a new last dim of 2 (for a non-tail axis this is the docs' interleaving of every two rows)."""
    axis = axis % codes.dim()
    moved = codes.movedim(axis, -1)
    if moved.shape[-1] % 2:
        moved = torch.nn.functional.pad(moved, (0, 1))
    pairs = moved.reshape(*moved.shape[:-1], -1, 2)
    return pairs.movedim(-2, axis).to(torch.uint8)


def element_output(values: torch.Tensor, fmt: ElementFormat) -> torch.Tensor:
    """Grid values as the op's element output: an fp8 tensor, or fp4 codes (uint8, one per element)."""
    if fmt.torch_dtype is not None:
        return values.float().to(fmt.torch_dtype)  # exact: the values are on the grid
    return fp4_codes(values, fmt)


def bitcast_fp4(x: torch.Tensor, dtype: torch.dtype, keep_dim: bool) -> torch.Tensor:
    """GE Bitcast to or from DT_FLOAT4_E2M1 (carried one code per byte): two codes per 8-bit element,
    element 2i in the low nibble. keep_dim=False consumes (packing) or appends (unpacking) a last dim of 2;
    keep_dim=True halves or doubles the last dim."""
    carrier = torch.float4_e2m1fn_x2
    if x.dtype == carrier and dtype == carrier:
        return x.clone()
    if x.dtype == carrier:
        if dtype not in (torch.uint8, torch.int8):
            refuse(f"Bitcast of DT_FLOAT4_E2M1 to {dtype}: only 8-bit targets are simulated")
        codes = x.view(torch.uint8)
        if not keep_dim:
            if codes.dim() == 0 or codes.shape[-1] != 2:
                refuse(f"x of shape {list(codes.shape)} must end in a dim of 2 to bitcast fp4 to {dtype}")
            codes = codes.flatten(-2)
        elif codes.dim() == 0 or codes.shape[-1] % 2:
            refuse(f"keep_dim needs an even last dim to pack fp4; x has shape {list(codes.shape)}")
        return pack_fp4(codes.contiguous()).view(dtype)
    if x.element_size() != 1:
        refuse(f"Bitcast of {x.dtype} to DT_FLOAT4_E2M1: only 8-bit sources are simulated")
    codes = unpack_fp4(x.contiguous().view(torch.uint8))
    if not keep_dim:
        codes = codes.reshape(*x.shape, 2)
    return codes.contiguous().view(carrier)
# GE dtype number -> (torch dtype, mantissa bits, smallest normal exponent, largest finite value)
FP8 = {35: (torch.float8_e5m2, 2, -14, 57344.0), 36: (torch.float8_e4m3fn, 3, -6, 448.0)}


def fp8_saturating_rint(values: torch.Tensor, number: int) -> torch.Tensor:
    """float32 `values` cast to the fp8 format of GE dtype `number` (35 e5m2, 36 e4m3fn) with SAT + CAST_RINT."""
    dtype, mantissa_bits, emin, largest = FP8[number]
    wide = torch.nan_to_num(values.float(), nan=0.0).clamp(-largest, largest)   # +-inf clamp to +-largest
    _, exponent = torch.frexp(wide)                  # wide = m * 2^exponent, 0.5 <= |m| < 1
    step = torch.clamp(exponent - 1, min=emin) - mantissa_bits
    quantum = ((step + 127) << 23).to(torch.int32).view(torch.float32)   # 2^step, built from its bits
    return (torch.round(wide / quantum) * quantum).to(dtype)   # exact: the grid's points are fp8 values


def as_int4(values: torch.Tensor) -> torch.Tensor:
    """Integer values in [-8, 7] as a DT_INT4 tensor (torch.int4, one per byte)."""
    return values.to(torch.int8).view(torch.int4)


def pack_int4(x: torch.Tensor, dtype: torch.dtype, keep_dim: bool) -> torch.Tensor:
    """Bitcast of DT_INT4 `x` to int32/int8/uint8: 2 per byte, element i of a group in bits 4i..4i+3."""
    per = {torch.int32: 8, torch.int8: 2, torch.uint8: 2}.get(dtype)
    if per is None:
        refuse(f"a Bitcast of int4 to {dtype}: only int32, int8 and uint8 are simulated")
    nibbles = x.view(torch.int8).to(torch.int64) & 0xF
    if keep_dim:
        if x.dim() == 0 or x.shape[-1] % per:
            refuse(f"int4 x of shape {list(x.shape)} must end in a multiple of {per} to bitcast to {dtype}")
        nibbles = nibbles.reshape(*x.shape[:-1], x.shape[-1] // per, per)
    elif x.dim() == 0 or x.shape[-1] != per:
        refuse(f"int4 x of shape {list(x.shape)} must end in a dim of {per} to bitcast to {dtype}")
    packed = (nibbles << (4 * torch.arange(per))).sum(-1)
    if dtype == torch.uint8:
        return packed.to(torch.uint8)
    bits = 4 * per
    return torch.where(packed >= 2 ** (bits - 1), packed - 2 ** bits, packed).to(dtype)   # two's complement


def unpack_int4(x: torch.Tensor, keep_dim: bool) -> torch.Tensor:
    """Bitcast of int32/int8/uint8 `x` to DT_INT4: each element's nibbles from bit 0 up, sign-extended; a new
    last dim of 8 (int32) or 2 (bytes), or with keep_dim the last dim times that."""
    per = {torch.int32: 8, torch.int8: 2, torch.uint8: 2}.get(x.dtype)
    if per is None:
        refuse(f"a Bitcast of {x.dtype} to int4: only int32, int8 and uint8 are simulated")
    if keep_dim and x.dim() == 0:
        refuse("keep_dim cannot rescale the last dim of a 0-d tensor")
    words = x.to(torch.int64) & (2 ** (4 * per) - 1)
    nibbles = torch.stack([(words >> (4 * index)) & 0xF for index in range(per)], dim=-1)
    values = torch.where(nibbles > 7, nibbles - 16, nibbles)
    return as_int4(values.flatten(-2) if keep_dim else values)


def check_modes(fmt, round_mode, scale_alg, dst_type_max=0.0, max_low_bound=0.0, scale_algs=(0, 1, 2),
                alg2_simulated=False):
    """The attr combinations CANN's MX quant docs and tiling checks allow, else a refusal naming the attr.
    dst_type_max (0, or 6 to 12) takes effect with scale_alg 2 only, as in the kernels."""
    check_round_mode(fmt, round_mode)
    if scale_alg not in scale_algs:
        refuse(f"scale_alg={scale_alg} is not one of {list(scale_algs)}")
    if scale_alg == 1 and fmt.torch_dtype is None:
        refuse("scale_alg=1 (cuBLAS scale) applies to fp8 outputs only")
    if not (float(dst_type_max) == 0.0 or 6.0 <= float(dst_type_max) <= 12.0):
        refuse(f"dst_type_max={dst_type_max} must be 0.0 or within [6.0, 12.0]")
    if scale_alg == 2:
        if not alg2_simulated:
            refuse("scale_alg=2 (dynamic dtype range) is simulated for DynamicMxQuant and DynamicBlockMxQuant only")
        if fmt is not E2M1:
            refuse("scale_alg=2 applies to float4_e2m1 outputs only")
        if float(dst_type_max) not in (0.0, 6.0, 7.0):
            refuse(f"dst_type_max={dst_type_max} with scale_alg=2: only 0, 6 and 7 (the kernel's bf16 rounding) "
                   "are simulated; other values take a cuBLAS-style path whose constants are not documented")
    if float(max_low_bound) != 0.0 and scale_alg != 1:
        refuse(f"max_low_bound={max_low_bound} is valid with scale_alg=1 only (must be 0.0 otherwise)")
    if float(max_low_bound) < 0:
        refuse(f"max_low_bound={max_low_bound} must be non-negative")


def check_fp4_last_dim(x, fmt):
    if fmt.torch_dtype is None and (x.dim() == 0 or x.shape[-1] % 2):
        refuse(f"an fp4 output needs x's last dim even (two per byte); x has shape {list(x.shape)}")


def mx_along(x, axis, block, fmt, round_mode, scale_alg=0, max_low_bound=0.0, dst_type_max=0.0):
    """(elements, mxscale codes uint8 in CANN's layout) of x quantised along axis."""
    result = quantize_blocks(x, axis, block, fmt, round_mode, scale_alg, max_low_bound, dst_type_max)
    return element_output(result.values, fmt), scale_layout(result.codes, axis)


def as_ge(elements, fmt):
    """Elements as a GE output: fp8 as is, fp4 e2m1 codes as the DT_FLOAT4_E2M1 carrier, fp4 e1m2 codes as uint8
    (one per byte: no torch dtype carries DT_FLOAT4_E1M2, so a graph cannot hold it, and the executor refuses such an
    output desc by name; torch_npu's eager ops read it from a kernel called directly)."""
    if fmt.torch_dtype is not None:
        return elements
    if fmt is not E2M1:
        return elements.view(torch.uint8)
    return elements.view(torch.float4_e2m1fn_x2)


def as_e8m0(codes):
    return codes.view(torch.float8_e8m0fnu)
