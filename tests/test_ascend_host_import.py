"""On an Ascend host `import op_plugin` gives TorchAir its converters at once (TorchAir's own
backends never go through npugraph); elsewhere it never imports TorchAir. No NPU here: the host is
simulated up to that boundary with stand-ins for torch_npu (an NPU that reports available) and a
torchair that records registrations."""
import subprocess
import sys
import textwrap


def _run(script: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_import_on_an_ascend_host_installs_the_converters_for_shipped_and_later_ops(tmp_path):
    yaml_path = tmp_path / "later.yaml"
    yaml_path.write_text("ops:\n  - func: npu_user_later(Tensor x) -> Tensor\n"
                         "    outputs: [{size: x.shape, dtype: x}]\n    ge: {type: NpuUserLater}\n")
    site = tmp_path / "site"  # an installed torch-npu distribution (op_plugin takes no other torch_npu for real)
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu" / "__init__.py").write_text("")
    (site / "torch_npu-2.13.0.dist-info").mkdir()
    (site / "torch_npu-2.13.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-npu\n"
                                                                  "Version: 2.13.0\n")
    out = _run(f"""
        import sys, types
        from collections import defaultdict
        sys.path.insert(0, {str(site)!r})
        import torch

        import torch_npu
        torch.npu = types.SimpleNamespace(is_available=lambda: True)

        registered = []
        def register_fx_node_ge_converter(op):
            def record(fn):
                registered.append(str(op))
                return fn
            return record
        torchair = types.ModuleType("torchair")
        torchair.register_fx_node_ge_converter = register_fx_node_ge_converter
        torchair.ge = types.SimpleNamespace(
            attr=types.SimpleNamespace(_ATTR_TYPE_MAP=defaultdict(lambda: lambda value: value)),
            _ge_graph=types.SimpleNamespace(torch_type_to_ge_type=lambda dtype: dtype))
        sys.modules["torchair"] = torchair

        import op_plugin
        from op_plugin._registry import loaded
        shipped = {{str(op_plugin._registry.library.op_overload(st.spec)) for st in loaded()}}
        assert shipped and shipped <= set(registered), sorted(shipped - set(registered))
        op_plugin.reference("npu_user_later")(lambda x: x)
        op_plugin.load_yaml({str(yaml_path)!r})
        assert "npu.npu_user_later.default" in registered, registered[-3:]
        assert "torchair._ge_concrete_graph" not in sys.modules
        print("installed", len(registered))
    """)
    assert out.startswith("installed")


def test_import_on_a_cpu_host_does_not_load_torchair():
    out = _run("""
        import sys
        import op_plugin
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("torchair", "torch_npu")))
    """)
    assert out.strip() == "[]"
