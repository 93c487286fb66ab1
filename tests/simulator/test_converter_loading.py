"""TorchAir's converter modules loaded at the first converter lookup (op_plugin/_lowering/converter_loading.py,
hosting/loader_deferred.py) instead of at TorchAir's load.

The oracle is TorchAir's own order: a child process in which the simulator does not defer them (TorchAir imports
them at its load, and op_plugin torch_npu's at its install, as on an Ascend host) must end with the same converter
on every op, the same declared cases and the same numbers as a child that defers them, with a user's registrations
and one taken back made before any lookup.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from op_plugin._lowering import converter_loading
from op_plugin._simulator.hosting import compile_key

_CHILD = textwrap.dedent("""
    import json, sys, torch, op_plugin
    from op_plugin._simulator.hosting import loader_deferred
    if sys.argv[1] == "eager":  # TorchAir imports its converter modules at its load, as on an Ascend host
        loader_deferred.CONVERTER_PACKAGE = "not deferred"
    from op_plugin._lowering import converter_loading, registry
    from op_plugin._simulator import load_simulated_torchair
    from op_plugin._simulator.hosting import compile_key
    torchair = load_simulated_torchair()
    if sys.argv[1] == "eager":  # and torch_npu's, as op_plugin's install does at `import op_plugin` there
        import torchair._ge_concrete_graph.ge_converter.custom
    out = {"pending_after_load": converter_loading.pending(),
           "aten_modules_after_load": sum(".ge_converter.aten." in m for m in sys.modules)}

    def users_add(x, y, alpha=1, meta_outputs=None):
        from torchair.ge import custom_op
        return custom_op("Add", x, y)  # the user's own converter (the key of a graph with it changes)

    def users_swiglu(x, dim=-1, meta_outputs=None):
        raise NotImplementedError

    # Before any lookup: the user's registrations, and one op_plugin takes back later.
    from torchair._ge_concrete_graph.fx2ge_converter import declare_supported
    from torchair._ge_concrete_graph.supported_declaration import F32, Support
    declare_supported([Support(F32(2), F32(2))])(
        torchair.register_fx_node_ge_converter(torch.ops.aten.add.Tensor)(users_add))
    torchair.register_fx_node_ge_converter(torch.ops.npu.npu_swiglu.default)(users_swiglu)
    handle = registry.swap_converter(torchair, torch.ops.aten.div.Tensor, users_add, "taken back")

    from torch.fx.experimental.proxy_tensor import make_fx
    def f(x, y):
        return torch.relu(x @ y) * 2 - y
    torch.manual_seed(0)
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    gm = make_fx(f)(x, y)
    config = torchair.CompilerConfig()
    key_before = compile_key.key_of(compile_key.key_details(gm, [x, y], config, {}))
    out["aten_modules_after_key"] = sum(".ge_converter.aten." in m for m in sys.modules)
    from torchair._ge_concrete_graph.fx2ge_converter import _declare_supported_converters
    out["declared_at_first_read"] = sum(c is not None for c in _declare_supported_converters().values())
    with torch.no_grad():
        result = torch.compile(f, backend="npugraph")(x, y)
    out["result"] = result.flatten().tolist()
    out["expected"] = f(x, y).flatten().tolist()
    out["key_stable"] = key_before == compile_key.key_of(compile_key.key_details(gm, [x, y], config, {}))
    out["aten_modules"] = sum(".ge_converter.aten." in m for m in sys.modules)
    handle.destroy()

    def named(converter):
        fn = getattr(converter, "__wrapped__", converter)
        return f"{fn.__module__}.{fn.__qualname__}"

    table = {}
    for namespace in ("aten", "prims", "npu"):
        for packet in list(vars(getattr(torch.ops, namespace)).values()):
            if isinstance(packet, torch._ops.OpOverloadPacket):
                for op in [packet, *vars(packet).values()]:
                    if isinstance(op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) \\
                            and op.__dict__.get("_ge_converter") is not None:
                        table[str(op)] = named(op.__dict__["_ge_converter"])
    out["table"] = table
    def target(op):
        return str(op) if isinstance(op, torch._ops.OpOverload) else f"{op.__module__}.{op.__qualname__}"
    out["declared"] = {target(op): len(c.supported_cases or ())  # their sample tensors are random
                       for op, c in _declare_supported_converters().items() if c is not None}
    print(json.dumps(out))
""")


def _child(mode: str) -> dict:
    env = {**os.environ, "OP_PLUGIN_COMPILE_CACHE": "0"}
    done = subprocess.run([sys.executable, "-c", _CHILD, mode], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def both():
    return _child("eager"), _child("deferred")


def test_the_deferred_load_ends_with_torchairs_own_order(both):
    eager, deferred = both
    assert not eager["pending_after_load"] and eager["aten_modules_after_load"] > 600
    assert deferred["pending_after_load"] and deferred["aten_modules_after_load"] == 0
    # every op's converter and every declared case, as when TorchAir imported them at its load
    assert len(deferred["table"]) > 1900
    assert deferred["table"] == eager["table"]
    assert deferred["declared"] == eager["declared"]
    assert deferred["declared_at_first_read"] == len(deferred["declared"])  # the first read loaded them all
    assert deferred["result"] == eager["result"]
    assert torch.allclose(torch.tensor(deferred["result"]), torch.tensor(deferred["expected"]), atol=1e-5)


def test_a_registration_made_before_the_load_wins_and_one_taken_back_gives_torchairs_back(both):
    eager, deferred = both
    assert deferred["table"]["aten.add.Tensor"].endswith("users_add")
    assert deferred["declared"]["aten.add.Tensor"] == 1  # the user's one case, not TorchAir's
    # on an Ascend host op_plugin's install imports torch_npu's converters at `import op_plugin`, so a user's
    # later registration wins there too
    assert deferred["table"]["npu.npu_swiglu.default"].endswith("users_swiglu")
    div = deferred["table"]["aten.div.Tensor"]
    assert not div.endswith("users_add") and div == eager["table"]["aten.div.Tensor"]


def test_the_key_reads_no_converter_and_is_the_same_once_they_loaded(both):
    _, deferred = both
    assert deferred["aten_modules_after_key"] == 0
    assert deferred["key_stable"] and deferred["aten_modules"] > 600


def test_an_op_keyed_by_the_converter_modules_must_have_had_a_converter(torchair):
    converter_loading.ensure_loaded()
    token = compile_key.torchair_converters_digest()
    assert compile_key.lacking_converters({"converters": {"aten.add.Tensor": token, "aten.relu.default": token}}) \
        is None
    lib = torch.library.Library("oplugin_loading_test", "DEF")
    lib.define("no_converter(Tensor x) -> Tensor")
    try:
        details = {"converters": {"aten.add.Tensor": token, "oplugin_loading_test.no_converter.default": token}}
        assert compile_key.lacking_converters(details) == "oplugin_loading_test.no_converter.default"
    finally:
        lib._destroy()


def test_a_read_that_finds_no_converter_loads_them_once(monkeypatch):
    loads = []
    monkeypatch.setattr(converter_loading, "_loader", [lambda: loads.append(1)])
    monkeypatch.setattr(converter_loading, "_queued", [])
    converter_loading._install_slot()
    op = torch.ops.aten.logaddexp2.default
    had = op.__dict__.pop("_ge_converter", None)
    try:
        assert not hasattr(op, "_ge_converter") and loads == [1]
        assert not hasattr(op, "_ge_converter") and loads == [1]  # loaded: a miss is a miss
    finally:
        if had is not None:
            op.__dict__["_ge_converter"] = had
