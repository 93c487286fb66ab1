"""torch_npu's Meta functions are parsed from the wheel once, then loaded from a cache keyed by the
wheel module's bytes: same code, same file and line numbers; a corrupt cache is rebuilt. A cache
file is authenticated (HMAC with the user's own key) before it is unmarshalled: a foreign file is
never run, and a cache that does not define what it names is rebuilt."""
import marshal

import pytest

from op_plugin._simulator.npu import wheel_meta as npu_ops_wheel
from op_plugin._simulator.hosting.install import simulator_dir

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
