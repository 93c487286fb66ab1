"""`import torch_npu` inside TorchAir's converters on a CPU host (op_plugin/_simulator/hosting/converter_torch_npu.py):
while TorchAir lowers a node, its converter functions get the CPU-host stand-in (npu/torch_npu_standin.py: dtype
constants, CANN 8.5.0, nothing else); `torch_npu` never enters sys.modules; other importers, other threads and
module-level imports keep Python's own import."""
import builtins
import sys
import threading

import pytest
import torch

from op_plugin._testing_harness import Npugraph, assert_close, check_compiled

npu = torch.ops.npu
pytestmark = pytest.mark.usefixtures("torchair")
PROBE_MODULE = "torchair._ge_concrete_graph.ge_converter.custom._op_plugin_probe"


def _probe(source: str, module: str = PROBE_MODULE):
    """`probe()` defined by `source` in a namespace named like a module of TorchAir's converter package."""
    namespace = {"__name__": module}
    exec(source, namespace)
    return namespace["probe"]


def _product(x, w):
    return (x.double().unsqueeze(-1) * w.double()).sum(-2)


def test_grouped_matmul_lowers_through_torchairs_own_converter():
    """npu_grouped_matmul's converter starts with `import torch_npu`: TorchAir's own, no op_plugin copy (op_plugin's
    correction in front of it only refuses the reserved activation arguments, then calls it)."""
    from op_plugin._lowering.torchair_api import TorchAirApi
    from op_plugin._simulator.hosting import converter_torch_npu

    def fn(x, w, group_list):
        return npu.npu_grouped_matmul([x], [w], group_list=group_list, split_item=2, group_type=0,
                                      group_list_type=1)[0]

    x, w, counts = torch.randn(6, 8), torch.randn(3, 8, 4), [1, 3, 2]
    run = check_compiled(fn, (x, w, torch.tensor(counts)), "GroupedMatmul", kind="npu_ops")
    converter = TorchAirApi.converter(npu.npu_grouped_matmul.default)  # TorchAir's, past op_plugin's correction
    assert converter.__module__ == "torchair._ge_concrete_graph.ge_converter.custom.grouped_matmul"
    rows = [r for g, n in enumerate(counts) for r in [g] * n]  # the expert of each row, index by index
    want = torch.stack([_product(x[r], w[rows[r]]) for r in range(6)]).float()
    assert_close(run.got, want, "npu_ops")
    assert "torch_npu" not in sys.modules
    assert not converter_torch_npu.is_layer(builtins.__import__)  # the hook is gone after the compile


def test_init_routing_v2_reads_torch_npu_hifloat8_while_lowering():
    """quant_mode 6 makes TorchAir's converter type expanded_x as `torch_npu.hifloat8` (290 -> DT_HIFLOAT8):
    the graph is built, and the executor then refuses the format by name (no CPU dtype for hifloat8)."""
    from op_plugin._simulator import GeExecutionError, capture_graphs
    from torchair.ge._ge_graph import DataType, _ge_dtype_to_ge_proto_dtype

    def fn(x, experts):
        return npu.npu_moe_init_routing_v2(x, experts, active_num=8, expert_num=3, quant_mode=6,
                                           expert_tokens_num_type=1, expert_tokens_num_flag=True,
                                           active_expert_range=[0, 3])

    experts = torch.tensor([[0, 2], [1, 0], [2, 1], [0, 1]], dtype=torch.int32)
    with capture_graphs() as graphs, pytest.raises(Exception, match="MoeInitRoutingV3.*DT_HIFLOAT8") as raised:
        Npugraph(fn)(torch.randn(4, 8), experts)
    assert "No module named 'torch_npu'" not in str(raised.value)
    assert any(isinstance(e, GeExecutionError) for e in _chain(raised.value))
    routing = [op for graph in graphs for op in graph.op if op.type == "MoeInitRoutingV3"]
    assert len(routing) == 1
    assert routing[0].output_desc[0].dtype == _ge_dtype_to_ge_proto_dtype(DataType.DT_HIFLOAT8)
    assert "torch_npu" not in sys.modules


def _chain(error):
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def test_converter_functions_see_the_constants_and_the_cann_version_only_during_a_call():
    from op_plugin._simulator.hosting.converter_torch_npu import converter_call

    probe = _probe("def probe():\n"
                   "    import torch_npu\n"
                   "    from torch_npu.npu.utils import _is_gte_cann_version, get_cann_version\n"
                   "    return (torch_npu.hifloat8, torch_npu.float8_e5m2, torch_npu.float4_e2m1fn_x2,\n"
                   "            get_cann_version(), _is_gte_cann_version('8.5.0'), _is_gte_cann_version('9.0.0'))\n")
    with pytest.raises(ModuleNotFoundError, match="torch_npu"):
        probe()  # outside a converter call: Python's own import
    with converter_call():
        got = probe()
        assert "torch_npu" not in sys.modules  # not even during the call
    assert got == (290, 291, 296, "8.5.0", True, False)
    assert repr(got[0]) == "torch_npu.hifloat8"
    assert "torch_npu" not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        probe()


def test_any_other_torch_npu_name_is_a_named_error():
    from op_plugin._simulator.hosting.converter_torch_npu import converter_call
    from op_plugin._simulator.npu.torch_npu_standin import TorchNpuUnavailable

    graph = _probe("def probe():\n    import torch_npu\n    return torch_npu.npu.NPUGraph\n")
    submodule = _probe("def probe():\n    from torch_npu.npu.streams import ExternalStream\n")
    with converter_call():
        with pytest.raises(TorchNpuUnavailable, match=r"torch_npu\.npu\.NPUGraph .*a CPU host has no torch_npu"):
            graph()
        with pytest.raises(TorchNpuUnavailable, match=r"torch_npu\.npu\.streams .*a CPU host has no torch_npu"):
            submodule()


def test_only_converter_functions_on_the_calling_thread_are_served():
    from op_plugin._simulator.hosting.converter_torch_npu import converter_call

    elsewhere = _probe("def probe():\n    import torch_npu\n", module="torchair.npu_fx_compiler_probe")
    module_level = "import torch_npu\ndef probe():\n    return torch_npu\n"
    other_thread = []
    converter = _probe("def probe():\n    import torch_npu\n    return torch_npu\n")

    def import_on_another_thread():
        try:
            converter()
            other_thread.append("served")
        except ModuleNotFoundError:
            other_thread.append("not served")

    with converter_call():
        assert converter() is not None
        with pytest.raises(ModuleNotFoundError):
            elsewhere()  # TorchAir code outside its converter package
        with pytest.raises(ModuleNotFoundError):
            _probe(module_level)  # a module-level import would keep the stand-in as a global
        thread = threading.Thread(target=import_on_another_thread)
        thread.start()
        thread.join()
    assert other_thread == ["not served"]


@pytest.mark.parametrize("removal", ["restores-what-it-wrapped", "restores-python-import", "during-the-call"])
def test_a_hook_installed_over_ours_and_removed_by_its_owner_leaves_the_stand_in_working(removal):
    """Another import hook installed while a converter runs wraps ours; however its owner removes it later
    (putting back what it wrapped, or Python's own import it saved earlier), converters still get the
    stand-in on every later call, and nothing of ours stays in builtins.__import__ once calls end. (The
    hook was once left out for the rest of the process when its owner restored Python's import.)"""
    from op_plugin._simulator.hosting.converter_torch_npu import converter_call, is_layer

    probe = _probe("def probe():\n    import torch_npu\n    return torch_npu.hifloat8\n")
    python_import = builtins.__import__
    seen = []

    def foreign_hook(wrapped):
        def hook(name, *args, **kwargs):
            seen.append(name)
            return wrapped(name, *args, **kwargs)
        return hook

    try:
        with converter_call():
            wrapped = builtins.__import__
            builtins.__import__ = foreign_hook(wrapped)
            assert probe() == 290
            if removal == "during-the-call":
                builtins.__import__ = wrapped
        assert "torch_npu" in seen or removal == "during-the-call"
        if removal == "restores-what-it-wrapped":
            builtins.__import__ = wrapped
        elif removal == "restores-python-import":
            builtins.__import__ = python_import
        for _ in range(2):
            with converter_call():
                assert probe() == 290
            assert not is_layer(builtins.__import__)
            with pytest.raises(ModuleNotFoundError):
                probe()  # outside a call: Python's own import
        assert "torch_npu" not in sys.modules
    finally:
        builtins.__import__ = python_import


def test_a_hook_that_stays_over_ours_keeps_both_working():
    from op_plugin._simulator.hosting.converter_torch_npu import converter_call, is_layer

    probe = _probe("def probe():\n    import torch_npu\n    return torch_npu.hifloat8\n")
    python_import = builtins.__import__
    seen = []

    def hook(name, *args, **kwargs):
        seen.append(name)
        return wrapped(name, *args, **kwargs)

    try:
        with converter_call():
            wrapped = builtins.__import__
            builtins.__import__ = hook
        for _ in range(2):
            with converter_call():
                assert probe() == 290
            assert builtins.__import__ is hook  # theirs stays on top; ours passes through beneath it
            import json  # noqa: F401  (any import still reaches their hook)
            assert seen[-1] == "json"
            with pytest.raises(ModuleNotFoundError):
                probe()
        assert not is_layer(python_import)
    finally:
        builtins.__import__ = python_import
