"""mode "aclgraph": TorchAir's npugraph_ex backend on an Ascend host, the AOT graph with the
reference kernels (said with a warning) on a CPU host."""
import warnings

import pytest
import torch
from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS

import op_plugin
from op_plugin import _backend


@pytest.fixture
def ascend_host_with_npugraph_ex(monkeypatch):
    """An Ascend host as op_plugin sees it: TorchAir not simulated, torch_npu's `npugraph_ex`
    backend registered with dynamo (a recording stand-in here)."""
    calls = []

    def npugraph_ex(gm, example_inputs, **kwargs):
        calls.append((gm, list(example_inputs)))
        return gm.forward

    monkeypatch.setattr(_backend, "load_torchair_for_host", lambda force_simulator=False: (object(), False))
    monkeypatch.setattr(_backend, "install_converters", lambda torchair, op_hook=None: None)
    monkeypatch.setattr(_backend, "refresh_library_converters", lambda: 0)
    monkeypatch.setitem(_COMPILER_FNS, "npugraph_ex", npugraph_ex)
    monkeypatch.setitem(_BACKENDS, "npugraph_ex", None)
    return calls


def test_aclgraph_on_an_ascend_host_uses_the_npugraph_ex_backend(ascend_host_with_npugraph_ex):
    gm = torch.fx.symbolic_trace(lambda x: x * 2)
    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "reduce-overhead is deprecated", no CPU-host warning
        compiled = _backend.compile_graph(gm, [x], _backend.NpuGraphConfig(mode="aclgraph"))
    ((traced, inputs),) = ascend_host_with_npugraph_ex
    assert traced is gm and inputs == [x]
    torch.testing.assert_close(compiled(x), x * 2)


def test_torch_compile_reduce_overhead_means_aclgraph(ascend_host_with_npugraph_ex):
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + 1, backend="npugraph", mode="reduce-overhead")
    torch.testing.assert_close(f(torch.zeros(2)), torch.ones(2))
    assert len(ascend_host_with_npugraph_ex) == 1


def test_dump_option_in_aclgraph_mode_says_nothing_is_dumped(tmp_path):
    torch._dynamo.reset()
    f = torch.compile(lambda x: x + 1, backend=op_plugin.npugraph_backend(mode="aclgraph", dump="txt",
                                                                         dump_dir=str(tmp_path)))
    with pytest.warns(UserWarning, match="mode 'aclgraph' .npugraph_ex. builds none"):
        f(torch.zeros(2))
    assert not any(tmp_path.iterdir())


def test_the_pinned_torchair_deprecates_reduce_overhead_for_npugraph_ex():
    """Why aclgraph no longer asks TorchAir for mode "reduce-overhead" (checked on the real TorchAir)."""
    torchair = op_plugin._simulator.load_simulated_torchair()
    config = torchair.CompilerConfig()
    assert "npugraph_ex" in config.mode.optional
    config.mode = "reduce-overhead"
    from torchair.configs.compiler_config import _check_config_support

    with pytest.warns(DeprecationWarning, match="Please use the .npugraph_ex. backend"):
        _check_config_support(config)


def test_acl_modes_say_that_a_data_dump_and_cache_compile_write_nothing_on_a_cpu_host(tmp_path):
    """Without the virtual NPU there is no ACL graph to dump from or to store: said, never silent (issue 34)."""
    import warnings

    torchair = op_plugin.load_torchair()
    dumping = torchair.CompilerConfig()
    dumping.mode = "reduce-overhead"
    dumping.dump_config.enable_dump = True
    dumping.dump_config.dump_path = str(tmp_path)  # TorchAir wants an existing folder
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(lambda x: x.relu() + 1, backend=torchair.get_npu_backend(compiler_config=dumping))(
            torch.randn(3))
    assert any("data dump (dump_config) in mode 'reduce-overhead'" in str(w.message) for w in caught)

    class _Model(torch.nn.Module):
        def forward(self, x):
            return x.relu() + 1

    caching = torchair.CompilerConfig()
    caching.mode = "reduce-overhead"
    model = _Model()
    model.forward = torchair.inference.cache_compile(model.forward, config=caching, cache_dir=str(tmp_path / "c"))
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = model(torch.randn(3))
    assert out.shape == (3,)
    assert any("cache_compile in an ACL-graph mode on a CPU host stores nothing" in str(w.message) for w in caught)
