"""The layout holds: stages import one way, the shipped pieces import only what they may, a module
dropped into meta/ registers, and every undoable registration is a RegistrationHandle."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin._base.handles import HandleGroup, RegistrationHandle

ROOT = Path(__file__).resolve().parents[1]
# The shipped pieces may use these only (meta/ and converters/ are outside op_plugin/, where
# import-linter cannot see them; reference_kernels is also in its layer contract).
PIECE_IMPORTS = {"op_plugin._registry.decorators", "op_plugin._registry.piece_modules",
                 "op_plugin._base.numerics", "torch", "torch.nn.functional", "torchair._ge_concrete_graph"}


def test_lint_imports_keeps_the_layer_contracts():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("folder", ["op_plugin/reference_kernels", "meta", "converters"])
def test_shipped_pieces_import_only_decorators_and_numerics(folder):
    for path in sorted((ROOT / folder).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert name == "__future__" or name in PIECE_IMPORTS, f"{path.name}:{node.lineno} imports {name}"


def test_meta_package_does_not_replace_the_decorator():
    import op_plugin.meta_functions  # the package of hand-written Meta functions

    assert callable(op_plugin.meta) and op_plugin.meta.__name__ == "meta"
    assert op_plugin.meta_functions.__name__ == "op_plugin.meta_functions"


def test_a_module_placed_in_meta_registers(tmp_path):
    """Dropping a file into meta/ is enough: a fresh process imports it with op_plugin."""
    import op_plugin.meta_functions as meta_pkg

    folder = Path(meta_pkg.__path__[0])
    probe = folder / "zz_layout_probe_meta.py"
    probe.write_text(textwrap.dedent('''
        import torch
        from op_plugin._registry.decorators import meta

        @meta("npu_layout_probe")
        def probe_meta(x):
            return x.new_empty(x.shape[0] * 2)
    '''), encoding="utf-8")
    yaml_path = tmp_path / "probe.yaml"
    yaml_path.write_text("ops:\n  - func: npu_layout_probe(Tensor x) -> Tensor\n", encoding="utf-8")
    code = textwrap.dedent(f'''
        import torch, op_plugin
        from torch._subclasses.fake_tensor import FakeTensorMode
        op_plugin.load_yaml({str(yaml_path)!r})
        with FakeTensorMode() as mode:
            out = torch.ops.npu.npu_layout_probe(mode.from_tensor(torch.empty(3)))
        print(tuple(out.shape))
    ''')
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    finally:
        probe.unlink()
        shutil.rmtree(folder / "__pycache__", ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(6,)"


def test_registration_handle_destroys_once():
    calls = []
    handle = RegistrationHandle(lambda: calls.append(1), "probe")
    handle.destroy()
    handle.destroy()
    assert calls == [1] and handle.destroyed


def test_handle_group_destroys_newest_first_and_every_member_even_after_a_failure():
    order = []

    def boom():
        order.append("boom")
        raise RuntimeError("member failed")

    group = HandleGroup("probe")
    group.add(RegistrationHandle(lambda: order.append("first")))
    group.add(RegistrationHandle(boom))
    group.add(RegistrationHandle(lambda: order.append("last")))
    with pytest.raises(RuntimeError, match="member failed"):
        group.destroy()
    assert order == ["last", "boom", "first"]
    late = group.add(RegistrationHandle(lambda: order.append("late")))
    assert late.destroyed and order[-1] == "late"  # a closed group takes nothing back later


def test_install_converters_is_all_or_nothing():
    """A host hook failing on one op takes back every converter installed so far; a retry works."""
    code = textwrap.dedent('''
        import torch, op_plugin
        from op_plugin._lowering import install as lowering
        from op_plugin._registry.library import op_overload
        from op_plugin._registry.op_state import loaded
        from op_plugin._simulator import load_simulated_torchair

        torchair = load_simulated_torchair()
        ops = [st for st in loaded() if st.spec.namespace == "npu"]
        seen = []

        def failing_hook(st):
            seen.append(st.qualname)
            if len(seen) == 3:
                raise RuntimeError("hook failed")

        try:
            lowering.install_converters(torchair, op_hook=failing_hook)
        except RuntimeError:
            pass
        assert lowering.installed_torchair() is None
        assert all("_ge_converter" not in op_overload(st.spec).__dict__ for st in ops), "converter left behind"
        assert all(len(st.handles) == 0 for st in ops), "handles left behind"
        lowering.install_converters(torchair, op_hook=lambda st: None)
        assert lowering.installed_torchair() is torchair
        assert all("_ge_converter" in op_overload(st.spec).__dict__ for st in ops)
        print(len(seen), len(ops))
    ''')
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    failed_at, total = map(int, result.stdout.split())
    assert failed_at == 3 and total >= 3


def test_unload_takes_back_the_simulator_pieces_of_a_custom_ge_type(tmp_path):
    from op_plugin._registry import detach, find
    from op_plugin._registry.library import op_overload
    from op_plugin._registry.load import unload
    from op_plugin._simulator.hosting.ir_registry import get_registered_ir_def
    from op_plugin._simulator.interpreter.kernels import lookup_kernel

    path = tmp_path / "layout_custom.yaml"
    path.write_text(textwrap.dedent("""
        ops:
          - func: npu_layout_twice(Tensor x) -> Tensor
            outputs: [{size: x.shape, dtype: x}]
            ge: {type: NpuLayoutTwice}
    """), encoding="utf-8")
    (qualname,) = op_plugin.load_yaml(path)
    op_plugin.reference(qualname)(lambda x: x * 2)
    try:
        compiled = torch.compile(lambda x: torch.ops.npu.npu_layout_twice(x) + 1, backend="npugraph")
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x * 2 + 1)
        op = op_overload(find(qualname).spec)
        assert get_registered_ir_def("NpuLayoutTwice")[0] == "SUCCESS" and lookup_kernel("NpuLayoutTwice")
        assert "_ge_converter" in op.__dict__
    finally:
        unload(qualname)
        detach(qualname, "reference")
        torch._dynamo.reset()
    assert get_registered_ir_def("NpuLayoutTwice") == ("ERROR", [], [], [])
    assert lookup_kernel("NpuLayoutTwice") is None
    assert "_ge_converter" not in op.__dict__
