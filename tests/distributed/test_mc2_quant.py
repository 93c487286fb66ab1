"""Quantised MC2 on 2 gloo ranks: npu_mm_all_reduce_base's full-quant form (int8 x1/x2, int32 bias,
dequant_scale int64 (TransQuantParam's FP19) / bfloat16 / float32 with pertoken_scale) and weight-quant
form (int8 x2 with antiquant_scale/offset, per-channel and per-group), and
npu_all_gather_quant_mm / npu_quant_mm_reduce_scatter (float16/bfloat16, float8 per-tensor), eager and
compiled with npugraph (TorchAir lowers them to MatmulAllReduce, AllGatherMatmulV2, MatmulReduceScatterV2).

The oracle is each rank's quantised matmul written from CANN's formulas in plain torch (a float64 matmul
of the integers, the scale's FP19 bits masked with struct, the float8 values widened) and torch.distributed's
own collectives; compiled and eager must also agree bit for bit."""
import struct

import pytest
import torch
import torch.distributed as dist

from op_plugin._simulator.npu.collective_matmul import hccl_comm_name

WORLD, K, N = 2, 32, 8


def _ints(seed: int, *shape, low=-8, high=8, dtype=torch.int8) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _floats(seed: int, *shape, dtype=torch.float32, scale=1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


def _fp19(value: float) -> float:
    """The float32 scale as the fixpipe reads it after npu_trans_quant_param: its low 13 mantissa bits cleared."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFE000))[0]


def _trans_quant_param(scales: list[float]) -> torch.Tensor:
    """npu_trans_quant_param's int64 packing: the FP19 bits, and bit 46 set."""
    return torch.tensor([struct.unpack("<I", struct.pack("<f", s))[0] & 0xFFFFE000 | (1 << 46) for s in scales],
                        dtype=torch.int64)


def _reference_quant(x1, x2, bias, scale, pertoken, out):
    """dequant * pertoken * (x1 @ x2 + bias) in CANN's order: exact integer product (float64 here), then float32."""
    acc = x1.double().reshape(-1, x1.shape[-1]) @ x2.double()
    if bias is not None:
        acc = acc + bias.double()
    y = acc.float() * scale
    if pertoken is not None:
        y = y * pertoken.unsqueeze(-1)
    return y.to(out).reshape(*x1.shape[:-1], x2.shape[-1])


# ---- full-quant npu_mm_all_reduce_base ------------------------------------------------------------------

def _all_reduce_inputs(rank: int, rows: int, form: str):
    x1, x2 = _ints(10 + rank, rows, K), _ints(20 + rank, K, N)
    bias = _ints(30 + rank, N, low=-50, high=50, dtype=torch.int32)
    if form == "int64":  # float16 output, per-channel scales packed by npu_trans_quant_param
        floats = [0.0123 + 0.001 * i for i in range(N)]
        return dict(x1=x1, x2=x2, bias=bias, dequant_scale=_trans_quant_param(floats),
                    x3=_floats(40 + rank, rows, N, dtype=torch.float16)), torch.tensor([_fp19(f) for f in floats])
    if form == "bf16":  # bfloat16 output, per-tensor bfloat16 scale, 3-D x1 with per-token scales
        scale = torch.tensor([0.0371], dtype=torch.bfloat16)
        x1 = x1.reshape(1, rows, K)
        return dict(x1=x1, x2=x2, bias=bias, dequant_scale=scale, pertoken_scale=_floats(50 + rank, rows).abs(),
                    x3=_floats(40 + rank, 1, rows, N, dtype=torch.bfloat16)), scale.float()
    scale = _floats(60, N).abs() * 0.01  # float32 per-channel with per-token scales: float16 output
    return dict(x1=x1, x2=x2, bias=bias, dequant_scale=scale, pertoken_scale=_floats(50 + rank, rows).abs()), scale


def _all_reduce_oracle(inputs, scale):
    out = torch.bfloat16 if inputs["dequant_scale"].dtype == torch.bfloat16 else torch.float16
    y = _reference_quant(inputs["x1"], inputs["x2"], inputs["bias"], scale, inputs.get("pertoken_scale"), out)
    if "x3" in inputs:
        y = (y.float() + inputs["x3"].float()).to(out)
    dist.all_reduce(y)
    return y


def quant_all_reduce_case(form: str, dynamic: bool):
    rank = dist.get_rank()
    hcom = hccl_comm_name()

    def fn(**inputs):
        return torch.ops.npu.npu_mm_all_reduce_base(hcom=hcom, **inputs)

    compiled_fn = torch.compile(fn, backend="npugraph", dynamic=dynamic, fullgraph=True)
    for rows in ([4, 6] if dynamic else [4]):
        inputs, scale = _all_reduce_inputs(rank, rows, form)
        compiled, eager, oracle = compiled_fn(**inputs), fn(**inputs), _all_reduce_oracle(inputs, scale)
        assert compiled.dtype == oracle.dtype and compiled.shape == oracle.shape, (compiled.dtype, compiled.shape)
        torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
        torch.testing.assert_close(compiled, oracle, rtol=0, atol=0)
        assert compiled.abs().max() > 0.1  # the scales did not flush the result to zero
    return True


# ---- weight-quantised npu_mm_all_reduce_base (A16W8) ------------------------------------------------------

def _weight_quant_inputs(rank: int, form: str) -> dict:
    k, dtype = (64, torch.float16) if form == "fp16_group" else (K, torch.bfloat16)
    params = (2, N) if form == "fp16_group" else (N,)  # per-group of 32 rows of x2, else per-channel
    inputs = dict(x1=_floats(100 + rank, 4, k, dtype=dtype), x2=_ints(110 + rank, k, N),
                  antiquant_scale=_floats(120 + rank, *params, dtype=dtype, scale=0.05),
                  antiquant_offset=_floats(130 + rank, *params, dtype=dtype, scale=2.0),
                  bias=_floats(140 + rank, N, dtype=dtype), x3=_floats(150 + rank, 4, N, dtype=dtype))
    if form == "fp16_group":
        inputs["antiquant_group_size"] = 32
    return inputs


def _weight_quant_unsharded(form: str) -> torch.Tensor:
    """sum over ranks of x1 @ ((x2 + offset) * scale) + bias + x3 (README case 7), in float64."""
    total = 0
    for rank in range(WORLD):
        e = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in _weight_quant_inputs(rank, form).items()}
        scale, offset = e["antiquant_scale"], e["antiquant_offset"]
        if form == "fp16_group":  # one row of parameters per 32 rows of x2
            scale, offset = scale.repeat_interleave(32, dim=0), offset.repeat_interleave(32, dim=0)
        total = total + e["x1"] @ ((e["x2"] + offset) * scale) + e["bias"] + e["x3"]
    return total


def weight_quant_all_reduce_case(form: str):
    hcom = hccl_comm_name()

    def fn(**inputs):
        return torch.ops.npu.npu_mm_all_reduce_base(hcom=hcom, **inputs)

    inputs = _weight_quant_inputs(dist.get_rank(), form)
    compiled, eager = torch.compile(fn, backend="npugraph", fullgraph=True)(**inputs), fn(**inputs)
    assert compiled.dtype == inputs["x1"].dtype and compiled.shape == (4, N)
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
    torch.testing.assert_close(compiled.double(), _weight_quant_unsharded(form), rtol=0.02, atol=0.05)
    return True


# ---- npu_all_gather_quant_mm / npu_quant_mm_reduce_scatter ----------------------------------------------

def _v2_inputs(rank: int, form: str):
    if form == "fp8":
        x1 = _floats(70 + rank, 4, K, scale=4).to(torch.float8_e4m3fn)
        x2 = _floats(80 + rank, K, N, scale=4).to(torch.float8_e5m2)
        return dict(input=x1, x2=x2, x1_scale=torch.tensor([0.5 + rank]), x2_scale=torch.tensor([0.031]),
                    y_dtype=15)  # torch.bfloat16's ScalarType number
    dtype = torch.float16 if form == "fp16" else torch.bfloat16
    return dict(input=_floats(70 + rank, 4, K, dtype=dtype), x2=_floats(80 + rank, K, N, dtype=dtype),
                bias=_floats(90 + rank, N, dtype=dtype))


def _v2_product(inputs) -> torch.Tensor:
    """One rank's matmul as CANN's case 1 / case 2 state it, in float64 then rounded once."""
    x1, x2 = inputs["input"], inputs["x2"]
    y = x1.double() @ x2.double()
    if "x1_scale" in inputs:
        return (y * (inputs["x1_scale"].double() * inputs["x2_scale"].double())).to(torch.bfloat16)
    return (y + inputs["bias"].double()).to(x2.dtype)


def v2_case(form: str, gather_output: bool):
    rank = dist.get_rank()
    hcom = hccl_comm_name()

    def fn(inputs, scattered_inputs):
        gathered_mm, gathered, amax = torch.ops.npu.npu_all_gather_quant_mm(
            hcom=hcom, world_size=WORLD, gather_output=gather_output, **inputs)
        scattered, amax_rs = torch.ops.npu.npu_quant_mm_reduce_scatter(hcom=hcom, world_size=WORLD,
                                                                       **scattered_inputs)
        return gathered_mm, gathered, amax, scattered, amax_rs

    inputs = _v2_inputs(rank, form)
    scattered_inputs = _v2_inputs(rank + 7, form)
    compiled = torch.compile(fn, backend="npugraph", fullgraph=True)(inputs, scattered_inputs)
    eager = fn(inputs, scattered_inputs)
    for c, e in zip(compiled, eager, strict=True):
        assert c.dtype == e.dtype and c.shape == e.shape, (c.dtype, c.shape, e.dtype, e.shape)
        torch.testing.assert_close(c.float(), e.float(), rtol=0, atol=0, equal_nan=False)
    # oracle: torch.distributed's all-gather of the rows (float8 widened: exact), then each op's formula
    pieces = [torch.empty(inputs["input"].shape, dtype=torch.float32) for _ in range(WORLD)]
    dist.all_gather(pieces, inputs["input"].float())
    every_row = torch.cat(pieces)
    gathered_mm = _v2_product({**inputs, "input": every_row})
    scattered = torch.empty(scattered_inputs["input"].shape[0] // WORLD, N, dtype=gathered_mm.dtype)
    dist.reduce_scatter(scattered, list(_v2_product(scattered_inputs).chunk(WORLD)))
    torch.testing.assert_close(compiled[0], gathered_mm, rtol=0, atol=0)
    if gather_output:
        torch.testing.assert_close(compiled[1].float(), every_row, rtol=0, atol=0)
    else:
        assert compiled[1].numel() == 0
    assert compiled[2].numel() == 0 and compiled[4].numel() == 0 and compiled[2].dtype == torch.float32
    torch.testing.assert_close(compiled[3], scattered, rtol=0, atol=0)
    return True


def refusals_case():
    hcom = hccl_comm_name()
    x1, x2 = _ints(1, 4, K), _ints(2, K, N)
    fp8 = _floats(3, 4, K).to(torch.float8_e4m3fn), _floats(4, K, N).to(torch.float8_e4m3fn)
    one = torch.tensor([1.0])
    calls = {
        "fp32 dequant without pertoken": lambda: torch.ops.npu.npu_mm_all_reduce_base(
            x1, x2, hcom, dequant_scale=torch.ones(N)),
        "weight quant with a dequant_scale": lambda: torch.ops.npu.npu_mm_all_reduce_base(
            _floats(1, 4, K, dtype=torch.float16), x2, hcom, antiquant_scale=torch.ones(N, dtype=torch.float16),
            dequant_scale=torch.ones(N)),
        "low-bit communication": lambda: torch.ops.npu.npu_mm_all_reduce_base(
            x1, x2, hcom, dequant_scale=torch.ones(N, dtype=torch.bfloat16), comm_quant_scale_1=torch.ones(N),
            comm_quant_scale_2=torch.ones(N)),
        "fp8 bias": lambda: torch.ops.npu.npu_all_gather_quant_mm(
            *fp8, hcom, WORLD, bias=torch.ones(N), x1_scale=one, x2_scale=one, y_dtype=15),
        "per-token fp8": lambda: torch.ops.npu.npu_quant_mm_reduce_scatter(
            *fp8, hcom, WORLD, x1_scale=torch.ones(4, 1), x2_scale=one, y_dtype=15),
        "hifloat8": lambda: torch.ops.npu.npu_quant_mm_reduce_scatter(
            x1.view(torch.uint8), x2.view(torch.uint8), hcom, WORLD, x1_dtype=290, x2_dtype=290, y_dtype=15),
        "world size": lambda: torch.ops.npu.npu_all_gather_quant_mm(
            _floats(1, 4, K, dtype=torch.float16), _floats(2, K, N, dtype=torch.float16), hcom, 4),
    }
    messages = {}
    for name, call in calls.items():
        try:
            call()
        except (ValueError, RuntimeError) as error:
            messages[name] = str(error)
        else:
            raise AssertionError(f"{name}: an unsupported quantised MC2 call ran")
    return messages


# ---- tests (parent side) ---------------------------------------------------------------------------

@pytest.mark.parametrize("form, dynamic", [("int64", False), ("bf16", True), ("fp32_pertoken", False)])
def test_full_quant_mm_all_reduce_matches_quant_matmul_and_all_reduce(ranks, form, dynamic):
    assert ranks(WORLD).run(quant_all_reduce_case, form, dynamic) == [True] * WORLD


@pytest.mark.parametrize("form", ["bf16_channel", "fp16_group"])
def test_weight_quant_mm_all_reduce_matches_the_dequantised_formula(ranks, form):
    assert ranks(WORLD).run(weight_quant_all_reduce_case, form) == [True] * WORLD


@pytest.mark.parametrize("form, gather_output", [("fp16", True), ("bf16", False), ("fp8", True)])
def test_all_gather_quant_mm_and_quant_mm_reduce_scatter(ranks, form, gather_output):
    assert ranks(WORLD).run(v2_case, form, gather_output) == [True] * WORLD


def test_quant_mc2_refusals_name_the_op_and_the_case(ranks):
    messages = ranks(WORLD).run(refusals_case)[0]
    expected = {
        "fp32 dequant without pertoken": ("npu_mm_all_reduce_base", "full-quant combinations"),
        "weight quant with a dequant_scale": ("npu_mm_all_reduce_base", "not with antiquant_scale"),
        "low-bit communication": ("npu_mm_all_reduce_base", "low-bit communication"),
        "fp8 bias": ("npu_all_gather_quant_mm", "bias with float8"),
        "per-token fp8": ("npu_quant_mm_reduce_scatter", "per-tensor"),
        "hifloat8": ("npu_quant_mm_reduce_scatter", "x1_dtype"),
        "world size": ("npu_all_gather_quant_mm", "rank_size 4"),
    }
    for name, words in expected.items():
        assert all(word in messages[name] for word in words), (name, messages[name])
