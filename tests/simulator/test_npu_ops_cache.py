"""torch_npu's Meta functions are parsed from the wheel once, then loaded from a cache keyed by the
wheel module's bytes: same code, same file and line numbers; a corrupt cache is rebuilt."""
import pytest

from op_plugin._simulator.npu import wheel_meta as npu_ops_wheel
from op_plugin._simulator.hosting.install import simulator_dir

NAMES = ["npu_rms_norm", "npu_rotary_mul"]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(npu_ops_wheel, "_CACHE_DIR", str(tmp_path))  # absolute: joins to itself
    return tmp_path


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
        assert npu_ops_wheel._read_cache(entry) is not None  # rewritten
    other = npu_ops_wheel.meta_functions(root, NAMES[:1])  # other names: another key
    assert len(list(cache_dir.glob("meta-*.bin"))) == 2 and set(other) == {NAMES[0]}
