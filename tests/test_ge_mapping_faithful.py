"""A YAML `ge:` mapping never makes graph mode compute something other than eager without saying
so: dropped arguments, one GE type claimed by two ops, a wrong built-in mapping."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import op_plugin
from op_plugin._registry import detach
from op_plugin._registry.load import _LOADED, unload


@pytest.fixture
def load(tmp_path):
    """load(name, text, reference) -> qualname; unloads and detaches everything at the end."""
    loaded: list[str] = []

    def _load(name, text, reference):
        path = tmp_path / f"{name}.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        qualnames = op_plugin.load_yaml(path)
        loaded.extend(qualnames)
        op_plugin.reference(qualnames[0])(reference)
        return qualnames[0]

    yield _load
    for qualname in loaded:
        if qualname in _LOADED:
            unload(qualname)
        detach(qualname, "reference")


def _compile(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="npugraph", fullgraph=True)


AFFINE = """
    ops:
      - func: npu_probe_affine(Tensor x, float alpha=1.0, float beta=0.0) -> Tensor
        outputs: [{size: x.shape, dtype: x}]
        ge: {type: NpuProbeAffine, attrs: {beta: beta}}
"""


def test_an_argument_left_out_of_ge_attrs_does_not_shift_the_others(load):
    load("affine", AFFINE, lambda x, alpha=1.0, beta=0.0: x * alpha + beta)
    x = torch.ones(3)
    got = _compile(lambda x: torch.ops.npu.npu_probe_affine(x, 1.0, 4.0))(x)
    torch.testing.assert_close(got, x + 4.0)   # positional binding gave x * 4.0


def test_a_non_default_value_for_an_unmapped_argument_is_refused(load):
    load("affine", AFFINE, lambda x, alpha=1.0, beta=0.0: x * alpha + beta)
    with pytest.raises(Exception, match=r"affine.yaml:3: op 'npu_probe_affine': field 'ge.attrs': .*alpha=3.0"):
        _compile(lambda x: torch.ops.npu.npu_probe_affine(x, 3.0, 4.0))(torch.ones(3))


def test_two_ops_cannot_share_a_custom_ge_type(load):
    text = """
        namespace: {ns}
        ops:
          - func: my_scale(Tensor x) -> Tensor
            outputs: [{{size: x.shape, dtype: x}}]
            ge: {{type: ProbeMyScale}}
    """
    first = load("dga", text.format(ns="dga"), lambda x: x * 3)
    _compile(lambda x: torch.ops.npu.npu_vector_add(x, x))(torch.ones(2))  # lowering installed
    with pytest.raises(op_plugin.OpPluginError,
                       match=r"dgb.yaml:4: .*ProbeMyScale is already the type of dga::my_scale"):
        load("dgb", text.format(ns="dgb"), lambda x: x * 2)
    assert "dgb::my_scale" not in _LOADED
    torch.testing.assert_close(_compile(lambda x: torch.ops.dga.my_scale(x))(torch.ones(3)), torch.full((3,), 3.0))
    assert first == "dga::my_scale"


def test_one_ge_type_declared_with_two_prototypes_is_refused_at_load(load):
    text = """
        namespace: {ns}
        ops:
          - func: scale(Tensor x, {arg}) -> Tensor
            outputs: [{{size: x.shape, dtype: x}}]
            ge: {{type: ProbeTwoProtos}}
    """
    load("one", text.format(ns="probe_one", arg="float k"), lambda x, k: x * k)
    with pytest.raises(op_plugin.YamlSpecError, match=r"two.yaml:4: op 'scale': field 'ge': GE type ProbeTwoProtos "
                                                      r"is already declared by probe_one::scale"):
        load("two", text.format(ns="probe_two", arg="int n"), lambda x, n: x * n)


def test_a_wrong_builtin_mapping_fails_every_compile_and_never_falls_back(tmp_path):
    """The mapping check runs when the lowering is installed (the first compile, in a fresh
    process); its failure must not leave a half-installed lowering, after which the op fell back to
    TorchAir's own converter for the built-in name (leaky relu computed as relu, silently)."""
    path = tmp_path / "badrelu.yaml"
    path.write_text(textwrap.dedent("""
        namespace: probe_bad
        ops:
          - func: leaky(Tensor x, float slope) -> Tensor
            outputs: [{size: x.shape, dtype: x}]
            ge: {type: Relu, inputs: [{features: x}], attrs: {slope: slope}}
    """), encoding="utf-8")
    code = textwrap.dedent(f"""
        import torch, op_plugin
        op_plugin.load_yaml({str(path)!r})
        op_plugin.reference("probe_bad::leaky")(lambda x, slope: torch.where(x > 0, x, x * slope))
        x = torch.tensor([-1.0, 2.0, -3.0])
        for attempt in range(2):
            torch._dynamo.reset()
            f = torch.compile(lambda x: torch.ops.probe_bad.leaky(x, 0.1), backend="npugraph")
            try:
                print("compiled", f(x).tolist())
            except Exception as error:
                print("error", "badrelu.yaml:4: op 'leaky': field 'ge': built-in Relu" in str(error))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["error True", "error True"], result.stdout
