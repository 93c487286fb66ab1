"""Oracles shared by the fp8 / int4 tests: fp8 codes decoded from their fields and CANN's saturating
round-half-even cast by a search over every code; int4 words packed and unpacked bit by bit (value i of each 8 in
bits 4i..4i+3, two's complement). Written without op_plugin's code, so the tests do not check it against itself."""
import math

import torch

E5M2, E4M3 = torch.float8_e5m2, torch.float8_e4m3fn
# (mantissa bits, exponent bias) of the OCP fp8 formats: e5m2 keeps IEEE's inf/NaN, e4m3fn has no inf.
FORMATS = {E5M2: (2, 15), E4M3: (3, 7)}


def code_value(code, dtype):
    """The value of an fp8 code, from its fields (sign, exponent, mantissa); None for inf/NaN."""
    mbits, bias = FORMATS[dtype]
    ebits = 7 - mbits
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
    if dtype == E5M2 and exponent == 0x1F or dtype == E4M3 and exponent == 0xF and mantissa == 0x7:
        return None
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mbits)
    return sign * (1 + mantissa / 2 ** mbits) * 2.0 ** (exponent - bias)


def nearest_code(value, dtype):
    """CANN's SAT + RINT cast by search over the positive codes: NaN -> 0; |value| beyond the largest -> the
    largest; else the nearest code, a tie to the one with an even mantissa (lowest bit 0); then the sign bit."""
    if value != value:
        return 0
    positive = [(c, v) for c in range(128) if (v := code_value(c, dtype)) is not None]
    magnitude = min(abs(value), max(v for _, v in positive))
    best = min(abs(v - magnitude) for _, v in positive)
    code = min((c for c, v in positive if abs(v - magnitude) == best), key=lambda c: c & 1)
    return code | (0x80 if math.copysign(1.0, value) < 0 else 0)


def pack_loop(values):
    """int32 words from int4 values, bit by bit: value i of each 8 in bits 4i..4i+3."""
    words = []
    for start in range(0, len(values), 8):
        word = sum((int(v) & 0xF) << (4 * i) for i, v in enumerate(values[start:start + 8]))
        words.append(word - 2 ** 32 if word >= 2 ** 31 else word)
    return words


def unpack_loop(word):
    """The 8 int4 values of an int32 word, bit by bit (value i in bits 4i..4i+3, two's complement)."""
    bits = word & 0xFFFFFFFF
    return [((bits >> (4 * i)) & 0xF) - (16 if (bits >> (4 * i)) & 0x8 else 0) for i in range(8)]
