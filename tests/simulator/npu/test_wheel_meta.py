"""The wheel-Meta reader (op_plugin/_simulator/npu/wheel_meta.py): what counts as a free name, and the
stand-ins for the torch_npu names the wheel's Meta functions use (issue 23, first part).

Every Meta function the wheel registers must compile on a CPU host; the fused-infer-attention Meta
(local annotations, a nested class) and the ones naming torch_npu's dtype constants or
get_cann_version must also run on meta tensors.

torch_npu's Meta functions are parsed from the wheel once, then loaded from a cache keyed by the
wheel module's bytes: same code, same file and line numbers; a corrupt cache is rebuilt. A cache
file is authenticated (HMAC with the user's own key) before it is unmarshalled: a foreign file is
never run, and a cache that does not define what it names is rebuilt."""
import ast
import marshal
import sys

import pytest
import torch

from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._simulator.npu import wheel_meta
from op_plugin._simulator.npu import wheel_meta as npu_ops_wheel

WHEEL = simulator_dir() / "torch_npu"


def _registered():
    source = (WHEEL / wheel_meta.META_MODULE).read_text()
    body = wheel_meta._resolve_version_branches(ast.parse(source).body)
    return wheel_meta._registered_meta(body)


def test_local_annotations_and_nested_definitions_are_no_free_names():
    tree = ast.parse(
        "def f(query):\n"
        "    class Layout:\n"
        "        def __init__(self, q: str):\n"
        "            self.q = q\n"
        "    def check():\n"
        "        return helper(query)\n"
        "    table: Dict[str, Layout] = {'BSH': Layout('BSH')}\n"
        "    check()\n"
        "    return table\n")
    assert wheel_meta._free_names(tree.body[0]) == {"helper", "str"}  # a parameter's annotation is evaluated
    module_level = ast.parse("X: Dict[str, int] = {}\n").body[0]  # evaluated at module level
    assert "Dict" in wheel_meta._free_names(module_level)


def test_fused_infer_attention_score_meta_is_read_and_runs():
    meta = wheel_meta.meta_functions(WHEEL, ["npu_fused_infer_attention_score"])["npu_fused_infer_attention_score"]
    q = torch.empty(2, 4, 1, 64, dtype=torch.float16, device="meta")
    k = torch.empty(2, 4, 16, 64, dtype=torch.float16, device="meta")
    out, lse = meta(q, k, k, num_heads=4, input_layout="BNSD")
    assert out.shape == (2, 4, 1, 64) and out.dtype == torch.float16


# The ops whose Meta functions name torch_npu's dtype constants (25) or get_cann_version (3).
DTYPE_OR_CANN_OPS = [
    "npu_mla_prolog_v3", "npu_mla_prolog_v3_functional", "npu_quant_mm_reduce_scatter", "npu_quant_gmm_alltoallv",
    "npu_alltoallv_quant_gmm", "npu_all_gather_quant_mm", "npu_moe_init_routing_v2",
    "npu_fused_infer_attention_score_v2", "npu_add_rms_norm_dynamic_quant", "npu_add_rms_norm_dynamic_mx_quant",
    "npu_grouped_matmul", "npu_grouped_matmul.List", "npu_add_quant_gmm_", "npu_add_quant_gmm",
    "npu_weight_quant_batchmatmul", "npu_quant_matmul", "npu_kronecker_quant", "npu_dequant_swiglu_quant",
    "npu_swiglu_mx_quant", "npu_grouped_matmul_swiglu_quant_v2", "npu_dynamic_mx_quant_with_dual_axis",
    "npu_dynamic_block_mx_quant", "npu_rotate_quant", "npu_sparse_flash_attention",
    "npu_sparse_flash_attention_grad", "npu_transpose_batchmatmul",
]


def test_every_registered_meta_function_compiles_without_torch_npu():
    names = list(_registered())
    assert len(names) >= 248
    metas = wheel_meta.meta_functions(WHEEL, names)
    assert all(callable(metas[name]) for name in DTYPE_OR_CANN_OPS)
    assert all(callable(fn) for fn in metas.values())
    assert "torch_npu" not in sys.modules


def test_dtype_constants_are_the_wheels_values():
    stand_in = wheel_meta._STAND_INS["torch_npu"]
    assert stand_in.hifloat8 == 290 and repr(stand_in.hifloat8) == "torch_npu.hifloat8"
    assert (stand_in.int4, stand_in.float8_e8m0fnu, stand_in.float4_e2m1fn_x2) == (285, 293, 296)
    assert stand_in.uint8 is torch.uint8
    # the wheel's own table agrees: every stand-in value maps to a storage dtype or a name there
    source = (WHEEL / wheel_meta.META_MODULE).read_text()
    for name, value in wheel_meta.TORCH_NPU_DTYPES.items():
        assert f"{value}:" in source, name
    with pytest.raises(NotImplementedError, match=r"torch_npu\.npu_format_cast needs torch_npu"):
        _ = stand_in.npu_format_cast


def test_cann_version_stand_in():
    assert wheel_meta._STAND_INS["get_cann_version"]() == wheel_meta.SIMULATED_CANN_VERSION == "8.5.0"
    gte = wheel_meta._STAND_INS["torch_npu"].npu.utils._is_gte_cann_version
    assert gte("8.5.0.alpha003") and gte("8.3.RC1") and gte("8.5.0") and not gte("9.2.0")


def test_meta_functions_using_stand_ins_run():
    metas = wheel_meta.meta_functions(WHEEL, ["npu_quant_matmul", "npu_transpose_batchmatmul",
                                              "npu_dynamic_mx_quant"])
    x1 = torch.empty(8, 32, dtype=torch.int8, device="meta")
    x2 = torch.empty(32, 16, dtype=torch.int8, device="meta")
    scale = torch.empty(16, dtype=torch.float32, device="meta")
    assert metas["npu_quant_matmul"](x1, x2, scale, output_dtype=5).shape == (8, 16)  # 5: float16
    a = torch.empty(4, 2, 32, dtype=torch.float16, device="meta")  # (M, B, K) with perm_x1 [1, 0, 2]
    b = torch.empty(2, 32, 16, dtype=torch.float16, device="meta")
    y = metas["npu_transpose_batchmatmul"](a, b, perm_x1=[1, 0, 2], perm_x2=[0, 1, 2], perm_y=[1, 0, 2])
    assert y.shape[-1] == 16
    x = torch.empty(4, 64, dtype=torch.float16, device="meta")
    y, _ = metas["npu_dynamic_mx_quant"](x, dst_type=wheel_meta._STAND_INS["torch_npu"].float4_e2m1fn_x2)
    assert y.shape == (4, 32) and y.dtype == torch.uint8


# ---- moved from tests/simulator/test_npu_ops_cache.py ----

NAMES = ["npu_rms_norm", "npu_rotary_mul"]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(npu_ops_wheel, "_CACHE_DIR", str(tmp_path / "cache"))  # absolute: joins to itself
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))  # the user's key, here
    (tmp_path / "cache").mkdir()
    return tmp_path / "cache"


def test_cached_meta_functions_are_the_parsed_ones(cache_dir):
    root = simulator_dir() / "torch_npu"
    parsed = npu_ops_wheel.meta_functions(root, NAMES)
    (entry,) = cache_dir.glob("meta-*.bin")
    cached = npu_ops_wheel.meta_functions(root, NAMES)
    for name in NAMES:
        a, b = parsed[name].__code__, cached[name].__code__
        assert (a.co_code, a.co_filename, a.co_firstlineno) == (b.co_code, b.co_filename, b.co_firstlineno)
        assert b.co_filename.endswith(npu_ops_wheel.META_MODULE)
    assert list(cache_dir.glob("meta-*.bin")) == [entry]


def test_a_corrupt_or_foreign_cache_is_rebuilt_not_trusted(cache_dir):
    root = simulator_dir() / "torch_npu"
    npu_ops_wheel.meta_functions(root, NAMES)
    (entry,) = cache_dir.glob("meta-*.bin")
    for garbage in (b"not marshal", b""):
        entry.write_bytes(garbage)
        functions = npu_ops_wheel.meta_functions(root, NAMES)
        assert set(functions) == set(NAMES)
        assert entry.read_bytes().startswith(npu_ops_wheel._MAGIC)  # rewritten
    other = npu_ops_wheel.meta_functions(root, NAMES[:1])  # other names: another key
    assert len(list(cache_dir.glob("meta-*.bin"))) == 2 and set(other) == {NAMES[0]}


def test_a_foreign_cache_file_is_never_run(cache_dir, tmp_path):
    """A well-formed cache someone else wrote (the old format: marshal of a code object and a name
    map, or the new magic with a MAC made with another key) is not executed: it is rebuilt."""
    root = simulator_dir() / "torch_npu"
    npu_ops_wheel.meta_functions(root, NAMES)
    (entry,) = cache_dir.glob("meta-*.bin")
    marker = tmp_path / "pwned"
    evil = compile(f"open({str(marker)!r}, 'w').write('ran')\n"
                   "def npu_rms_norm_meta(*a): pass\ndef npu_rotary_mul_meta(*a): pass\n", "evil", "exec")
    names = {"npu_rms_norm": "npu_rms_norm_meta", "npu_rotary_mul": "npu_rotary_mul_meta"}
    payload = marshal.dumps((evil, names))
    key = entry.stem.split("-", 1)[1]
    for forged in (payload, npu_ops_wheel._MAGIC + npu_ops_wheel._mac(b"k" * 32, key, payload) + payload):
        entry.write_bytes(forged)
        functions = npu_ops_wheel.meta_functions(root, NAMES)
        assert not marker.exists(), "a cache file this user did not write was executed"
        assert functions["npu_rms_norm"].__code__.co_filename.endswith(npu_ops_wheel.META_MODULE)
        assert entry.read_bytes() != forged  # rebuilt


def test_an_authenticated_cache_naming_a_missing_function_is_rebuilt(cache_dir):
    """A cache that runs but does not define what it names is stale, not a KeyError on every call."""
    root = simulator_dir() / "torch_npu"
    npu_ops_wheel.meta_functions(root, NAMES)
    (entry,) = cache_dir.glob("meta-*.bin")
    key = entry.stem.split("-", 1)[1]
    secret = npu_ops_wheel._secret()
    npu_ops_wheel._write_cache(entry, key, secret, (compile("x = 1\n", "stale", "exec"),
                                                    {"npu_rms_norm": "gone", "npu_rotary_mul": "gone"}))
    for _ in range(2):
        functions = npu_ops_wheel.meta_functions(root, NAMES)
        assert set(functions) == set(NAMES) and all(callable(f) for f in functions.values())
    assert npu_ops_wheel._load(npu_ops_wheel._read_cache(entry, key, secret), NAMES) is not None  # rewritten


def test_the_key_is_private_to_the_user(cache_dir, tmp_path):
    secret = npu_ops_wheel._secret()
    key_file = tmp_path / "home-cache" / "op-plugin" / "meta-cache.key"
    assert len(secret) == 32 and key_file.stat().st_mode & 0o077 == 0
    assert npu_ops_wheel._secret() == secret
    key_file.chmod(0o644)  # readable by others: not a secret any more, so no cache is trusted or written
    assert npu_ops_wheel._secret() is None
    functions = npu_ops_wheel.meta_functions(simulator_dir() / "torch_npu", NAMES)
    assert set(functions) == set(NAMES) and not list(cache_dir.glob("meta-*.bin"))
