"""CPU kernels of torch_npu's RMSNorm, rotary, SwiGLU and scatter-nd operators (CPU dispatch key).

On an NPU each of these eager ops runs the CANN kernel that its GE type runs in a graph, so each is an
adapter over that GE kernel (``ge_op(type)``, semantics and refusals documented with the kernel) that maps
torch_npu's arguments onto the GE op's inputs and attrs and names the op in every refusal:

* ``npu_rms_norm(x, gamma, epsilon)`` -> RmsNorm (``interpreter/kernels/norm/rms_norm.py``): ``(y, rstd)``.
* ``npu_add_rms_norm(x1, x2, gamma, epsilon)`` -> AddRmsNorm: ``(y, rstd, x)``.
* ``npu_rotary_mul(x, r1, r2, rotary_mode, rotate)`` -> RotaryPositionEmbedding (``kernels/posembedding/
  rope.py``; aclnnRotaryPositionEmbedding) with mode 0 "half", 1 "interleave", 2 "quarter", 3
  "interleave-half", r1/r2 as cos/sin and the optional ``rotate`` matrix (modes 0 and 1 only). TorchAir
  lowers the half mode off Ascend 950 to RotaryMul, the same values.
* ``npu_swiglu(x, dim)`` -> SwiGlu (``kernels/activation/swiglu.py``).
* ``npu_apply_rotary_pos_emb(query, key, cos, sin, layout, rotary_mode)`` -> ApplyRotaryPosEmb with the
  layout attr TorchAir writes (BSND 1, SBND 2, BNSD 3, TND 4). On an NPU eager updates query and key in place
  and returns them (docs: "原地更新"); the schema declares no alias, so here the results are new tensors
  (TorchAir's graph copies the inputs first, TensorMove: the same).
* ``npu_interleave_rope(x, cos, sin)`` -> InterleaveRope.
* ``npu_scatter_nd_update(self, indices, updates)`` -> ScatterNdUpdate (``kernels/index/scatter.py``) on a
  copy (TorchAir: TensorMove + ScatterNdUpdate); ``npu_scatter_nd_update_`` writes the result into self.
"""
from __future__ import annotations

from ..interpreter.calls import ge_op
from ..interpreter.errors import KernelError
from .checks import named_refusals, writable


@named_refusals("npu_rms_norm")
def npu_rms_norm(self, gamma, epsilon=1e-6):
    return ge_op("RmsNorm")(self, gamma, epsilon=epsilon)


@named_refusals("npu_add_rms_norm")
def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    return ge_op("AddRmsNorm")(x1, x2, gamma, epsilon=epsilon)


# npu_rotary_mul's rotary_mode as RotaryPositionEmbedding's mode attr (TorchAir's converter's table)
_ROTARY_MODES = {"half": 0, "interleave": 1, "quarter": 2, "interleave-half": 3}


def _mode(table, what, value):
    if value not in table:
        raise KernelError(f"{what} {value!r} is not one of {', '.join(map(repr, table))}")
    return table[value]


@named_refusals("npu_rotary_mul")
def npu_rotary_mul(self, r1, r2, rotary_mode="half", rotate=None):
    mode = _mode(_ROTARY_MODES, "rotary_mode", rotary_mode)
    return ge_op("RotaryPositionEmbedding")(self, r1, r2, rotate, mode=mode)


@named_refusals("npu_swiglu")
def npu_swiglu(self, dim=-1):
    return ge_op("SwiGlu")(self, dim=dim)


# npu_apply_rotary_pos_emb's layout as ApplyRotaryPosEmb's layout attr (TorchAir's converter; torch_npu's docs
# list these four layouts)
_ROPE_LAYOUTS = {"BSND": 1, "SBND": 2, "BNSD": 3, "TND": 4}


@named_refusals("npu_apply_rotary_pos_emb")
def npu_apply_rotary_pos_emb(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    code = _mode(_ROPE_LAYOUTS, "layout", layout)
    return ge_op("ApplyRotaryPosEmb")(query, key, cos, sin, layout=code, rotary_mode=rotary_mode)


@named_refusals("npu_interleave_rope")
def npu_interleave_rope(x, cos, sin):
    return ge_op("InterleaveRope")(x, cos, sin)


@named_refusals("npu_scatter_nd_update")
def npu_scatter_nd_update(self, indices, updates):
    return ge_op("ScatterNdUpdate")(self, indices, updates)


@named_refusals("npu_scatter_nd_update_")
def npu_scatter_nd_update_(self, indices, updates):
    writable("npu_scatter_nd_update_", self=self)
    return self.copy_(ge_op("ScatterNdUpdate")(self, indices, updates))


KERNELS = {
    "npu_scatter_nd_update": npu_scatter_nd_update,
    "npu_scatter_nd_update_": npu_scatter_nd_update_,
    "npu_apply_rotary_pos_emb": npu_apply_rotary_pos_emb,
    "npu_interleave_rope": npu_interleave_rope,
    "npu_rms_norm": npu_rms_norm,
    "npu_add_rms_norm": npu_add_rms_norm,
    "npu_rotary_mul": npu_rotary_mul,
    "npu_swiglu": npu_swiglu,
}
