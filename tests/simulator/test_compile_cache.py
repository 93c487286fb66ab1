"""npugraph's persistent compile cache (op_plugin/_simulator/hosting/compile_cache.py).

The oracle for a hit is the miss: the same graph compiled without the cache (bit for bit) and eager (within
float tolerance). A hit is seen in the cache's counters, which count calls of TorchAir's lowering skipped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import op_plugin
from op_plugin._base.signed_cache import SignedCache
from op_plugin._simulator.hosting import compile_cache


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OP_PLUGIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OP_PLUGIN_COMPILE_CACHE", raising=False)
    compile_cache._store.cache_clear()
    torch._dynamo.reset()
    yield tmp_path / "cache" / f"compile-v{compile_cache.FORMAT}"
    compile_cache._store.cache_clear()
    torch._dynamo.reset()


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _counts():
    s = compile_cache.stats()
    return s.hits, s.misses, s.stored


def _compile_and_run(model, *inputs, **options):
    torch._dynamo.reset()
    return torch.compile(model, backend=op_plugin.npugraph_backend(**options))(*inputs)


def test_a_second_compile_takes_the_lowering_from_the_cache_and_computes_the_same_bits(cache_dir):
    torch.manual_seed(0)
    model, x = _Block().eval(), torch.randn(4, 8, 16)
    with torch.no_grad():
        uncached = _compile_and_run(model, x, compile_cache=False)
        hits, misses, stored = _counts()
        first = _compile_and_run(model, x)
        assert _counts() == (hits, misses + 1, stored + 1)
        second = _compile_and_run(model, x)
        assert _counts() == (hits + 1, misses + 1, stored + 1)
        expected = model(x)
    assert torch.equal(first, uncached) and torch.equal(second, uncached)
    torch.testing.assert_close(second, expected, rtol=1e-5, atol=1e-5)
    assert len(list(cache_dir.glob("*.json"))) == 1


def test_training_graphs_forward_and_backward_hit_and_give_the_same_gradients(cache_dir):
    torch.manual_seed(0)
    model, x = _Block(), torch.randn(4, 8, 16)

    def grads():
        model.zero_grad()
        _compile_and_run(model, x).sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    first = grads()
    hits = compile_cache.stats().hits
    second = grads()
    assert compile_cache.stats().hits == hits + 2  # the forward and the backward graph
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


def test_dynamic_shapes_hit_and_serve_every_size(cache_dir):
    torch.manual_seed(0)
    model = _Block().eval()
    xs = [torch.randn(2, n, 16) for n in (5, 9, 13)]
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="npugraph", dynamic=True)
        first = [compiled(x) for x in xs]
        hits = compile_cache.stats().hits
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="npugraph", dynamic=True)
        second = [compiled(x) for x in xs]
        assert compile_cache.stats().hits == hits + 1
        for x, a, b in zip(xs, first, second, strict=True):
            assert torch.equal(a, b)
            torch.testing.assert_close(b, model(x), rtol=1e-5, atol=1e-5)


def test_an_option_that_changes_the_lowering_is_another_entry(cache_dir):
    model, x = torch.nn.GELU(), torch.randn(64)
    with torch.no_grad():
        _compile_and_run(model, x)
        hits = compile_cache.stats().hits
        kept = _compile_and_run(model, x, torchair_gelu=True)  # TorchAir's tanh Gelu: another GE graph
    assert compile_cache.stats().hits == hits
    assert len(list(cache_dir.glob("*.json"))) == 2
    torch.testing.assert_close(kept, torch.nn.functional.gelu(x, approximate="tanh"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("damage", ["edit", "truncate", "foreign secret"])
def test_a_damaged_entry_is_refused_with_a_warning_and_never_run(cache_dir, damage):
    model, x = _Block().eval(), torch.randn(2, 3, 16)
    with torch.no_grad():
        expected = _compile_and_run(model, x)
    (entry,) = cache_dir.glob("*.json")
    text = entry.read_text()
    if damage == "edit":  # code an attacker would like run: the payload changed, the MAC kept
        record = json.loads(text)
        payload = json.loads(record["payload"])
        payload["py_code"] = "raise SystemExit('tampered code ran')\n" + payload["py_code"]
        record["payload"] = json.dumps(payload, sort_keys=True)
        entry.write_text(json.dumps(record))
    elif damage == "truncate":
        entry.write_text(text[: len(text) // 2])
    else:  # a whole, well-formed entry signed with another secret
        SignedCache(cache_dir, b"someone else's secret", 1 << 30).put(entry.stem, json.loads(
            json.loads(text)["payload"]))
    hits = compile_cache.stats().hits
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        again = _compile_and_run(model, x)
    assert any("signature does not match" in str(w.message) for w in caught)
    assert compile_cache.stats().hits == hits
    assert torch.equal(again, expected)
    json.loads(entry.read_text())  # replaced by a good entry from the recompile


def test_turned_off_by_the_environment_or_the_option_nothing_is_written(cache_dir, monkeypatch):
    model, x = _Block().eval(), torch.randn(2, 3, 16)
    with torch.no_grad():
        _compile_and_run(model, x, compile_cache=False)
        monkeypatch.setenv("OP_PLUGIN_COMPILE_CACHE", "0")
        _compile_and_run(model, x)
    assert not cache_dir.exists() or not list(cache_dir.glob("*.json"))


def test_random_ops_are_compiled_but_not_stored(cache_dir):
    def noisy(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) * 2

    stored = compile_cache.stats().stored
    _compile_and_run(noisy, torch.randn(8))
    assert compile_cache.stats().stored == stored


def test_entries_beyond_the_size_bound_go_least_recently_used_first(tmp_path):
    store = SignedCache(tmp_path, b"k" * 32, max_bytes=3000)
    for index in range(6):
        store.put(f"k{index}", {"blob": "x" * 900})
        os.utime(tmp_path / f"k{index}.json", (index, index))  # a clear order of use
    store.get("k0") if (tmp_path / "k0.json").exists() else None
    kept = sorted(p.stem for p in tmp_path.glob("*.json"))
    assert sum(p.stat().st_size for p in tmp_path.glob("*.json")) <= 3000
    assert kept and "k5" in kept and "k1" not in kept


_CHILD = textwrap.dedent("""
    import json, sys, torch, op_plugin
    from op_plugin._simulator.hosting import compile_cache
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        out = torch.compile(model, backend="npugraph")(x)
        error = (out - model(x)).abs().max().item()
    s = compile_cache.stats()
    print(json.dumps({"hits": s.hits, "misses": s.misses, "out": out.flatten().tolist(), "error": error}))
""")


def _run_children(cache_root, count):
    env = {**os.environ, "OP_PLUGIN_CACHE_DIR": str(cache_root)}
    env.pop("OP_PLUGIN_COMPILE_CACHE", None)
    children = [subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(count)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_processes_share_the_cache_and_concurrent_writers_leave_it_whole(tmp_path):
    racing = _run_children(tmp_path, 2)  # two cold processes write the same entry at once
    (later,) = _run_children(tmp_path, 1)
    assert all(r["hits"] + r["misses"] == 1 for r in racing) and any(r["misses"] for r in racing)
    assert later == {**later, "hits": 1, "misses": 0}
    assert later["out"] == racing[0]["out"] == racing[1]["out"]
    assert later["error"] < 1e-5
    entries = list((tmp_path / f"compile-v{compile_cache.FORMAT}").glob("*.json"))
    assert len(entries) == 1 and not list(entries[0].parent.glob(".writing-*"))


def test_generated_code_that_names_an_undefined_symbol_is_not_stored():
    code = "import torch\nx0 = 1\ndef kernel(*args):\n    s1 = args[0]\n    return s1 + s86 + x0 + len(args)\n"
    assert compile_cache.unbound_names(code) == ["s86"]


def test_without_a_place_for_the_signing_secret_the_cache_is_off_and_compiling_works(cache_dir, tmp_path,
                                                                                     monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker))
    model, x = _Block().eval(), torch.randn(2, 3, 16)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        out = _compile_and_run(model, x)
        expected = model(x)
    assert any("signing secret cannot be read or made" in str(w.message) for w in caught)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    assert not cache_dir.exists() or not list(cache_dir.glob("*.json"))


def test_fx_shapes_survive_the_store_as_data_not_text():
    import sympy
    from torch.utils._sympy.functions import FloorDiv

    from op_plugin._simulator.hosting import fx_meta

    s0 = sympy.Symbol("s0", integer=True, positive=True)
    s1 = sympy.Symbol("s1", integer=True, positive=True)
    record = fx_meta.FxMetaRecord(outputs={"mm": (2, s0 * s1, FloorDiv(s0, 2) + 1)}, placeholders={"x": (s0, s1),
                                                                                                     "n": s1})
    back = fx_meta.record_from_data(json.loads(json.dumps(fx_meta.record_to_data(record))))
    assert back.outputs == record.outputs and back.placeholders == record.placeholders
    with pytest.raises(fx_meta.UnserializableRecord, match="uses sin"):
        fx_meta.record_to_data(fx_meta.FxMetaRecord(outputs={"y": (sympy.sin(s0),)}))
