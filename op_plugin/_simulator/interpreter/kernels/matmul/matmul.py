"""Matrix-multiply GE ops (CANN ops-nn `matmul/`): MatMul/MatMulV2/MatMulV3 (2-D) and
BatchMatMul/V2/V3 (broadcast batches).

y = op(x1) @ op(x2) + bias, op a transpose of the last two dims when transpose_x1/x2 (adj_x1/x2)
is set. 16-bit float inputs are multiplied with float32 accumulation and rounded once, as the cube
unit does. A quantised weight offset (offset_w, offset_x) is refused.

MatMulV3 and BatchMatMulV3 are absent from the prototype table of the pinned TorchAir (none of its
converters emits them; GE's MatMulToMatmulV3 fusion pass and aclnnMatmul/aclnnBatchMatMul produce
them on the device), so their prototypes are declared here from CANN's own REG_OP text, ops-nn
`matmul/mat_mul_v3/op_graph/mat_mul_v3_proto.h` and `matmul/batch_mat_mul_v3/op_graph/
batch_mat_mul_v3_proto.h`: the inputs and attrs of MatMulV2/BatchMatMulV2 plus a precision-mode
attr (opImplMode, enable_hf32). A graph written against those docs (`ascendir_MatMulV3.md`,
`ascendir_BatchMatMulV3.md`) runs here with the same semantics as V2.

TransposeBatchMatMul (CANN ops-nn ``matmul/transpose_batch_mat_mul``): what TorchAir lowers torch_npu's
npu_transpose_batchmatmul to.

From CANN's doc: x1 and x2 are 3-D; ``perm_x1``/``perm_x2`` are the transposes that bring them to
``[B, M, K]`` and ``[B, K, N]`` (the entry 0 marks the batch dim), the batched product is then transposed
by ``perm_y`` (``[1, 0, 2]``: ``[M, B, N]``). Computed in float32 and rounded once to x1's dtype. Refused:
``scale`` (an int8 output; how the packed uint64 scale is applied and rounded is not documented),
``batch_split_factor`` > 1 (CANN's docs give only the output's shape, ``[factor, M, B*N/factor]``
in the English doc and torch_npu's Meta, ``[M, factor, B*N/factor]`` in the Chinese README; not which element
goes where), ``bias`` (reserved: torch_npu refuses it) and ``enable_hf32`` (HF32 rounding).
An empty perm is the identity.
"""
from __future__ import annotations

import torch
from ....._ge.reg_op import parse_reg_ops
from ...registry import ge_kernel, refuse
from ..common import opmath

# The REG_OP text of ops-nn's mat_mul_v3_proto.h and batch_mat_mul_v3_proto.h, as CANN writes it.
_V3_PROTOTYPES = parse_reg_ops('''
"""REG_OP(MatMulV3)
    .INPUT(x1, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .INPUT(x2, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OPTIONAL_INPUT(bias, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OPTIONAL_INPUT(offset_w, TensorType({DT_INT8, DT_INT4}))
    .ATTR(transpose_x1, Bool, false)
    .ATTR(transpose_x2, Bool, false)
    .ATTR(offset_x, Int, 0)
    .ATTR(opImplMode, Int, 0x1)
    .OP_END_FACTORY_REG(MatMulV3)
"""
"""REG_OP(BatchMatMulV3)
    .INPUT(x1, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .INPUT(x2, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OPTIONAL_INPUT(bias, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OPTIONAL_INPUT(offset_w, TensorType({DT_INT8, DT_INT4}))
    .ATTR(adj_x1, Bool, false)
    .ATTR(adj_x2, Bool, false)
    .ATTR(offset_x, Int, 0)
    .ATTR(enable_hf32, Bool, false)
    .OP_END_FACTORY_REG(BatchMatMulV3)
"""
''')
_V3_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_OP_IMPL_MODE = ("the NPU's precision/performance mode (0x1 default, 0x40 hf32, ...); the CPU multiplies in "
                 "float32 either way")
_ENABLE_HF32 = "lets the NPU multiply float32 in hf32; the CPU multiplies in float32 either way"


def _matmul(x1, x2, bias, transpose_x1, transpose_x2):
    if transpose_x1:
        x1 = x1.transpose(-1, -2)
    if transpose_x2:
        x2 = x2.transpose(-1, -2)
    if x1.dtype.is_floating_point:
        # The cube unit accumulates 16-bit products in float32 and rounds the result once.
        wide1, wide2 = opmath(x1), opmath(x2)
        if bias is not None and wide1.dim() == 2 and wide2.dim() == 2 and bias.dim() <= 1:
            result = torch.addmm(opmath(bias), wide1, wide2)  # the call eager's linear makes
        else:
            result = torch.matmul(wide1, wide2)
            if bias is not None:
                result = result + opmath(bias)
        return result if result.dtype == x1.dtype else result.to(x1.dtype)
    result = torch.matmul(x1, x2)
    return result if bias is None else result + bias


_AS_IS = (torch.float32, torch.float64)  # dtypes multiplied as they are: the aten call eager makes


def _matmul_call(x1, x2, bias, transpose_x1, transpose_x2):
    """The call computing `_matmul` for inputs of these specs; it takes the kernel's inputs
    (x1, x2, then bias and offset_w where the prototype has them)."""
    if x1.dtype in _AS_IS and x2.dtype == x1.dtype and (bias is None or bias.dtype == x1.dtype):
        matmul, addmm = torch.matmul, torch.addmm

        def operands(x1, x2):
            return (x1.transpose(-1, -2) if transpose_x1 else x1), (x2.transpose(-1, -2) if transpose_x2 else x2)

        if bias is None:
            if not (transpose_x1 or transpose_x2):
                return lambda x1, x2, *unfed: matmul(x1, x2)
            return lambda x1, x2, *unfed: matmul(*operands(x1, x2))
        if x1.dim() == 2 and x2.dim() == 2 and bias.dim() <= 1:
            return lambda x1, x2, bias, *unfed: addmm(bias, *operands(x1, x2))
        return lambda x1, x2, bias, *unfed: matmul(*operands(x1, x2)) + bias
    return lambda x1, x2, bias=None, *unfed: _matmul(x1, x2, bias, transpose_x1, transpose_x2)


def _no_quantised_offset(offset_w, offset_x):
    if offset_w is not None:
        refuse("offset_w (quantised weights) is not supported by the simulator")
    if offset_x:
        refuse(f"offset_x={offset_x} (a quantised input offset) is not supported by the simulator")


def _two_d(x1, x2):
    if x1.dim() != 2 or x2.dim() != 2:
        refuse(f"takes 2-D inputs, got {list(x1.shape)} and {list(x2.shape)}")


@ge_kernel("MatMul", one_dtype=("x1", "x2"), prepared=True)
def mat_mul(x1, x2, bias, *, transpose_x1, transpose_x2):
    _two_d(x1, x2)
    return _matmul_call(x1, x2, bias, transpose_x1, transpose_x2)


@ge_kernel("MatMulV2", one_dtype=("x1", "x2"), prepared=True)
def mat_mul_v2(x1, x2, bias, offset_w, *, transpose_x1, transpose_x2, offset_x):
    _no_quantised_offset(offset_w, offset_x)
    _two_d(x1, x2)
    return _matmul_call(x1, x2, bias, transpose_x1, transpose_x2)


@ge_kernel("MatMulV3", one_dtype=("x1", "x2"), prototype=_V3_PROTOTYPES["MatMulV3"],
           accepts={"x1": _V3_FLOATS, "x2": _V3_FLOATS}, layout_only={"opImplMode": _OP_IMPL_MODE}, prepared=True)
def mat_mul_v3(x1, x2, bias, offset_w, *, transpose_x1, transpose_x2, offset_x):
    _no_quantised_offset(offset_w, offset_x)
    _two_d(x1, x2)
    return _matmul_call(x1, x2, bias, transpose_x1, transpose_x2)


@ge_kernel("BatchMatMul", one_dtype=("x1", "x2"), prepared=True)
def batch_mat_mul(x1, x2, *, adj_x1, adj_x2):
    return _matmul_call(x1, x2, None, adj_x1, adj_x2)


@ge_kernel("BatchMatMulV2", one_dtype=("x1", "x2"), prepared=True)
def batch_mat_mul_v2(x1, x2, bias, offset_w, *, adj_x1, adj_x2, offset_x):
    _no_quantised_offset(offset_w, offset_x)
    return _matmul_call(x1, x2, bias, adj_x1, adj_x2)


@ge_kernel("BatchMatMulV3", one_dtype=("x1", "x2"), prototype=_V3_PROTOTYPES["BatchMatMulV3"],
           accepts={"x1": _V3_FLOATS, "x2": _V3_FLOATS}, layout_only={"enable_hf32": _ENABLE_HF32}, prepared=True)
def batch_mat_mul_v3(x1, x2, bias, offset_w, *, adj_x1, adj_x2, offset_x):
    _no_quantised_offset(offset_w, offset_x)
    return _matmul_call(x1, x2, bias, adj_x1, adj_x2)

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


def _permutation(what, perm, rank=3):
    perm = list(perm) if perm else list(range(rank))
    if sorted(perm) != list(range(rank)):
        refuse(f"{what}={perm} is not a permutation of {list(range(rank))}")
    return perm


@ge_kernel("TransposeBatchMatMul", one_dtype=("x1", "x2"), accepts={"x1": _FLOATS, "x2": _FLOATS})
def transpose_batch_mat_mul(x1, x2, bias, scale, *, perm_x1, perm_x2, perm_y, enable_hf32, batch_split_factor):
    if scale is not None:
        refuse("scale (an int8 output quantised by packed uint64 scales) is not simulated: its rounding is "
               "not documented")
    if bias is not None:
        refuse("bias is reserved by CANN (torch_npu refuses it)")
    if batch_split_factor != 1:
        refuse(f"batch_split_factor={batch_split_factor} is not simulated: CANN's docs give the output's shape "
               "only, not which element goes where")
    if enable_hf32:
        refuse("enable_hf32=True: HF32 rounding of float32 inputs is not simulated")
    if x1.dim() != 3 or x2.dim() != 3:
        refuse(f"x1 and x2 must be 3-D, got {x1.dim()} and {x2.dim()} dims")
    a = x1.permute(_permutation("perm_x1", perm_x1))
    b = x2.permute(_permutation("perm_x2", perm_x2))
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        refuse(f"x1 permuted to {tuple(a.shape)} and x2 to {tuple(b.shape)} are not [B, M, K] and [B, K, N]")
    y = torch.matmul(opmath(a).float(), opmath(b).float())
    return y.permute(_permutation("perm_y", perm_y)).contiguous().to(x1.dtype)
