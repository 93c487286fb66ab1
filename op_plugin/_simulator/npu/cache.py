"""torch_npu's KV-cache ops (CPU dispatch key): paged-cache writes and the fused RMS norm + rope + cache
write are adapters over the GE kernels TorchAir lowers them to (``interpreter/kernels/attention/kv_cache.py``:
ScatterPaKvCache, KvRmsNormRopeCache, the computation and its one refusal list): argument mapping as the
converters (``ge_converter/custom/npu_scatter_pa_kv_cache.py``, ``npu_kv_rmsnorm_rope_cache.py``), output
packing, the in-place writes the schemas declare, and the op's name in every refusal. The v2 ops'
``k_cache_dtype``/``ckv_cache_dtype`` (hifloat8/fp8 caches) have no GE attr and are refused here.
``npu_scatter_list`` -> ScatterList (``interpreter/kernels/index/scatter.py``).
Semantics from CANN's operator docs (ops-transformer ``attention/scatter_pa_kv_cache``,
``posembedding/kv_rms_norm_rope_cache``) and torch_npu's docs.

* ``npu_scatter_pa_kv_cache(key, value, key_cache, value_cache, slot_mapping, cache_mode)`` (in place;
  ``_functional``: new caches): token ``t`` goes to slot ``s = slot_mapping[t]``, i.e. block
  ``s // block_size``, row ``s % block_size``. ``cache_mode="Norm"`` (CANN scenario 2): cache
  ``[blocks, block_size, heads, head_size]``, ``cache[b, r] = key[t]``. ``"PA_NZ"`` (scenario 1): cache
  ``[blocks, heads * head_size // L, block_size, L]`` or ``[blocks, heads, head_size // L, block_size, L]``
  with ``L = 32 / itemsize``, the token's ``heads * head_size`` values split in rows of ``L``
  (on an NPU this tensor carries the FRACTAL_NZ format; its logical values are the same on a CPU host).
  Refused: the compressed scenarios (4-D key, ``compress_lens``/``seq_lens``/``compress_seq_offsets``:
  CANN documents their shapes, not which token lands where), slots outside ``[0, blocks * block_size)``
  and a slot given twice (CANN: "not guaranteed correct").
* ``npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, ...)`` (aclnnKvRmsNormRopeCache
  and V2): without ``v`` (V1) kv ``[B, 1, S, D]`` splits into ``Dv = gamma.numel()`` and ``Dk = D - Dv``;
  ``c_kv = rms_norm(kv[..., :Dv]) * gamma``, ``k_rope = x_part1 * cos + x_part2 * sin`` with ``x = kv[..., Dv:]``,
  ``x_part1 = cat(x[::2], x[1::2])``, ``x_part2 = cat(-x[1::2], x[::2])``. With ``v`` (V2, kv-separated, N in
  1, 2, 4, 8): the RMS norm of all of kv, the rope on its first ``cos.shape[-1]`` dims, the rest passed on,
  and ``c_kv = v``. float32 inside, rounded to kv's dtype. Each token ``(b, s)`` is written to the caches:
  ``Norm``: index ``[B, S]``, cache ``[Bc, N, Sc, .]`` at ``index[b, s]``; ``PA``/``PA_BNSD``/``PA_NZ``: index
  ``[B * S]``, cache ``[blocks, block_size, N, .]`` at slot ``index[b * S + s]``. An index of -1 skips the
  token. An int8 cache stores CANN's quantisation of the values: ``round(x * scale + offset)`` clamped to
  [-128, 127] (``round`` read as torch's, half to even; scale/offset float32 broadcasting over ``[N, D]``).
  Refused: ``PA_BLK_*`` (where a token lands inside the block its index names is not documented) and
  hifloat8/fp8 caches (the v2 ``*_cache_dtype`` formats). k_rope and c_kv are returned whatever
  ``is_output_kv`` says (on an NPU they are only written when it is True). The v1 op updates the caches in
  place (as on an NPU, though its schema declares no mutation) and returns copies of them; v2 is declared
  in place; ``_v2_functional`` returns new caches.
* ``npu_scatter_list(self, indices, updates, mask, reduce, axis)`` (ops-nn ``index/scatter_list``, its
  golden): new copies of the tensors of ``self``; for each ``i`` whose ``mask[i]`` is not 0 (all without
  mask), ``self[i]``'s window ``[start, start + n)`` along ``axis`` (of ``updates``, which has one more leading
  dim; the var axis is one less) takes ``updates[i]``'s first ``n`` rows: 1-D ``indices[i]`` is ``start`` with
  ``n`` the updates' axis size, 2-D ``indices[i]`` is ``[start, n]``. A window outside the var axis is refused
  (the README: out-of-range indices are not supported), as is a reduce other than ``"update"``.
"""
from __future__ import annotations

from ..interpreter.calls import ge_op
from ..interpreter.errors import KernelError
from .checks import named_refusals


def _scatter_pa(key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets, seq_lens,
                cache_mode):
    # A Norm-layout cache under the default PA_NZ: the GE kernel's refusal names cache_mode="Norm", for eager
    # and graph mode alike (one refusal list per op, in its GE kernel).
    return ge_op("ScatterPaKvCache")(key, key_cache, slot_mapping, value, value_cache, compress_lens,
                                     compress_seq_offsets, seq_lens, cache_mode=cache_mode or "Norm",
                                     scatter_mode="None", strides=[1, 1], offsets=[0, 0])


@named_refusals("npu_scatter_pa_kv_cache_functional")
def npu_scatter_pa_kv_cache_functional(key, value, key_cache, value_cache, slot_mapping, *, compress_lens=None,
                                       compress_seq_offsets=None, seq_lens=None, cache_mode="PA_NZ"):
    return _scatter_pa(key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets,
                       seq_lens, cache_mode)


@named_refusals("npu_scatter_pa_kv_cache")
def npu_scatter_pa_kv_cache(key, value, key_cache, value_cache, slot_mapping, *, compress_lens=None,
                            compress_seq_offsets=None, seq_lens=None, cache_mode="PA_NZ"):
    new_key, new_value = _scatter_pa(key, value, key_cache, value_cache, slot_mapping, compress_lens,
                                     compress_seq_offsets, seq_lens, cache_mode)
    key_cache.copy_(new_key)
    value_cache.copy_(new_value)


def _kv_rmsnorm_rope(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset,
                     c_kv_offset, v, epsilon, cache_mode, is_output_kv, k_cache_dtype=None, ckv_cache_dtype=None):
    """KvRmsNormRopeCache: (new k_cache, new ckv_cache, k_rope, c_kv)."""
    if k_cache_dtype is not None or ckv_cache_dtype is not None:
        raise KernelError("k_cache_dtype/ckv_cache_dtype (hifloat8/fp8 caches) are not simulated")
    return ge_op("KvRmsNormRopeCache")(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
                                       k_rope_offset, c_kv_offset, v, epsilon=epsilon, cache_mode=cache_mode,
                                       is_output_kv=is_output_kv)


@named_refusals("npu_kv_rmsnorm_rope_cache")
def npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None, c_kv_scale=None,
                              k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
                              is_output_kv=False):
    k_out, ckv_out, k_rope, c_kv = _kv_rmsnorm_rope(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                                                    c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                                                    is_output_kv)
    k_cache.copy_(k_out)  # in place, as on an NPU (the caches are the aclnn op's in/out tensors)
    ckv_cache.copy_(ckv_out)
    return k_out, ckv_out, k_rope, c_kv


@named_refusals("npu_kv_rmsnorm_rope_cache_v2")
def npu_kv_rmsnorm_rope_cache_v2(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                 c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5,
                                 cache_mode="Norm", is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None):
    k_out, ckv_out, k_rope, c_kv = _kv_rmsnorm_rope(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                                                    c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                                                    is_output_kv, k_cache_dtype, ckv_cache_dtype)
    k_cache.copy_(k_out)
    ckv_cache.copy_(ckv_out)
    return k_rope, c_kv


@named_refusals("npu_kv_rmsnorm_rope_cache_v2_functional")
def npu_kv_rmsnorm_rope_cache_v2_functional(kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None,
                                            c_kv_scale=None, k_rope_offset=None, c_kv_offset=None, v=None,
                                            epsilon=1e-5, cache_mode="Norm", is_output_kv=False, k_cache_dtype=None,
                                            ckv_cache_dtype=None):
    k_out, ckv_out, k_rope, c_kv = _kv_rmsnorm_rope(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                                                    c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                                                    is_output_kv, k_cache_dtype, ckv_cache_dtype)
    return k_rope, c_kv, k_out, ckv_out


@named_refusals("npu_scatter_list")
def npu_scatter_list(self, indices, updates, mask=None, reduce="update", axis=-2):
    """ScatterList (what TorchAir's converter lowers it to, on TensorMove copies of the list)."""
    return list(ge_op("ScatterList")(list(self), indices, updates, mask, reduce=reduce, axis=axis))


KERNELS = {
    "npu_scatter_list": npu_scatter_list,
    "npu_scatter_pa_kv_cache": npu_scatter_pa_kv_cache,
    "npu_scatter_pa_kv_cache_functional": npu_scatter_pa_kv_cache_functional,
    "npu_kv_rmsnorm_rope_cache": npu_kv_rmsnorm_rope_cache,
    "npu_kv_rmsnorm_rope_cache_v2": npu_kv_rmsnorm_rope_cache_v2,
    "npu_kv_rmsnorm_rope_cache_v2_functional": npu_kv_rmsnorm_rope_cache_v2_functional,
}
