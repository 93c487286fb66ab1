"""An argument the FX node leaves out reaches TorchAir's converter as the schema's default, not the
converter's own (op_plugin/_lowering/schema_defaults.py). Oracle: eager on the same call."""
from __future__ import annotations

import pytest
import torch

import op_plugin  # defines torch_npu's ops on a CPU host
from op_plugin._testing_harness import check_compiled


@pytest.fixture(scope="module")
def schema_defaults(torchair):
    from op_plugin._lowering import schema_defaults

    torch.compile(lambda x: x + 1, backend="npugraph")(torch.ones(1))  # installs the converters
    return schema_defaults


def test_the_mismatches_are_found_from_the_schemas(schema_defaults):
    from op_plugin._lowering.torchair_api import registered_wrapper

    def wrapped(op):
        fn = registered_wrapper(op)
        inner = getattr(fn, "__wrapped__", fn)
        return inner.__name__ == "with_schema_defaults", inner

    found = {}
    for op in (torch.ops.npu.npu_group_norm_silu.default, torch.ops.aten._embedding_bag.default):
        is_wrapped, inner = wrapped(op)
        assert is_wrapped, op
        found[str(op)] = {name: default for name, (_, default) in
                          schema_defaults.default_mismatches(op, inner.__wrapped__).items()}
    assert found == {"npu.npu_group_norm_silu.default": {"eps": 1e-5}, "aten._embedding_bag.default": {"mode": 0}}
    assert not wrapped(torch.ops.aten.add.Tensor)[0]  # its converter agrees with its schema


def test_a_default_left_out_by_the_node_computes_what_eager_computes(schema_defaults):
    x, g, b = torch.randn(2, 8, 3, 4).half(), torch.randn(8).half(), torch.randn(8).half()
    check_compiled(lambda x, g, b: torch.ops.npu.npu_group_norm_silu(x, g, b, 4), (x, g, b), "GroupNormSilu",
                   kind="kernel")  # eps=1e-5 dropped by the node: TorchAir's converter would use 1e-4
    weight, indices, offsets = torch.randn(10, 3), torch.tensor([1, 2, 2, 5, 9, 0]), torch.tensor([0, 2, 4])
    check_compiled(lambda w, i, o: torch.ops.aten._embedding_bag(w, i, o)[0], (weight, indices, offsets),
                   "EmbeddingBag", kind="kernel")  # mode=0 (sum) dropped: TorchAir's converter would use mean


def test_a_default_given_explicitly_is_passed_on(schema_defaults):
    x, g, b = torch.randn(2, 8, 3, 4).half(), torch.randn(8).half(), torch.randn(8).half()
    check_compiled(lambda x, g, b: torch.ops.npu.npu_group_norm_silu(x, g, b, 4, 0.5), (x, g, b), "GroupNormSilu",
                   kind="kernel")


def _every_overload_with_a_converter():
    """The scan's oracle: every overload of every aten / npu packet, each asked for by name (builds them all)."""
    found = []
    for namespace in ("aten", "npu"):
        ops = getattr(torch.ops, namespace)
        for name in dir(ops):
            packet = getattr(ops, name, None)
            for overload in getattr(packet, "overloads", lambda: [])():
                op = getattr(packet, overload, None)
                if op is not None and "_ge_converter" in getattr(op, "__dict__", {}):
                    found.append(op)
    return found


def test_the_scan_finds_every_overload_with_a_converter(schema_defaults):
    scanned = list(schema_defaults._overloads())  # first: the oracle builds the overloads the scan skips
    assert len(scanned) > 1000
    assert {id(op) for op in scanned} == {id(op) for op in _every_overload_with_a_converter()}


def test_a_converters_defaults_are_read_as_inspect_reads_them(schema_defaults):
    import functools
    import inspect

    from op_plugin._lowering.torchair_api import torchair_converter

    def by_inspect(fn):
        return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}

    def plain(a, b=2, /, c=3, *args, d, e=5, **kw):
        return a

    @functools.wraps(plain)
    def wrapper(*args, **kwargs):
        return plain(*args, **kwargs)

    def with_signature(x, y=1):
        return x

    with_signature.__signature__ = inspect.Signature([inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                                        default=7)])
    converters = [torchair_converter(op) for op in schema_defaults._overloads()]
    for fn in [c for c in converters if c is not None] + [plain, wrapper, with_signature,
                                                          functools.partial(plain, 1, e=9)]:
        assert schema_defaults.parameter_defaults(fn) == by_inspect(fn), fn
    assert schema_defaults.parameter_defaults(len) == {}  # no signature: no defaults (inspect raises)


def test_a_cache_hit_lowers_with_the_schemas_default_as_the_miss_did(schema_defaults, tmp_path, monkeypatch):
    """npu_group_norm_silu with eps left out: the schema's 1e-5, not the converter's 1e-4, on a miss and on the hit
    of another compile (the key hashes the wrapped converter). Small values make eps visible in float32."""
    from op_plugin._simulator.hosting import compile_cache

    monkeypatch.setenv("OP_PLUGIN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OP_PLUGIN_COMPILE_CACHE", raising=False)
    compile_cache._store.cache_clear()
    torch.manual_seed(0)
    x, g, b = torch.randn(2, 8, 3, 4) * 1e-3, torch.randn(8), torch.randn(8)

    def model(x, g, b):
        return torch.ops.npu.npu_group_norm_silu(x, g, b, 4)[0]

    results = []  # (result, hits, misses) of each compile
    try:
        for _ in range(2):
            torch._dynamo.reset()
            before = compile_cache.stats()
            out = torch.compile(model, backend=op_plugin.npugraph_backend())(x, g, b)
            after = compile_cache.stats()
            results.append((out, after.hits - before.hits, after.misses - before.misses))
    finally:
        torch._dynamo.reset()
        compile_cache._store.cache_clear()
    (miss, miss_hits, misses), (hit, hits, hit_misses) = results
    assert (miss_hits, misses, hits, hit_misses) == (0, 1, 1, 0)
    assert torch.equal(hit, miss)
    torch.testing.assert_close(miss, model(x, g, b), rtol=1e-4, atol=1e-5)  # eager: the schema's eps
    assert not torch.allclose(miss, torch.ops.npu.npu_group_norm_silu(x, g, b, 4, 1e-4)[0], rtol=1e-3, atol=1e-5)
