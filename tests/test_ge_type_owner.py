"""A custom GE type belongs to one op: a second file claiming it is refused when it loads, naming
both places, and registers nothing; what was loaded before keeps compiling (issue 26, item 13).

Before, both files loaded; the conflict surfaced at the first npugraph compile, whose installation
(all or nothing) then failed for every compile in the process: plain torch code and the first
file's ops included. Run in a fresh process: the lowering must not be installed yet, as in a user's
script that loads its YAML files before compiling anything.
"""
import subprocess
import sys
import textwrap

FIRST = """\
namespace: gtowner_a
ops:
  - func: twin(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: GtOwnerTwin}
"""
SECOND = """\
namespace: gtowner_b
ops:
  - func: other(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: GtOwnerOther}
  - func: twin(Tensor x) -> Tensor
    outputs: [{size: x.shape, dtype: x}]
    ge: {type: GtOwnerTwin}
"""
SCRIPT = """
import torch, op_plugin
from op_plugin._lowering.install import installed_handles

op_plugin.reference("gtowner_a::twin")(lambda x: x + 1)
op_plugin.reference("gtowner_b::twin")(lambda x: x + 2)
op_plugin.reference("gtowner_b::other")(lambda x: x + 3)
assert op_plugin.load_yaml({first!r}) == ["gtowner_a::twin"]
assert installed_handles() is None  # nothing compiled yet
try:
    op_plugin.load_yaml({second!r})
except op_plugin.YamlSpecError as error:
    print("refused:", error)
    print("location:", error.location.line, error.location.op, error.location.field)
else:
    raise SystemExit("the second file loaded")
for name in ("other", "twin"):
    assert not hasattr(torch.ops.gtowner_b, name) or not torch._C._dispatch_has_kernel("gtowner_b::" + name)
x = torch.arange(6.0).reshape(2, 3)
plain = torch.compile(lambda t: t * 2 + 1, backend="npugraph", fullgraph=True)
torch.testing.assert_close(plain(x), x * 2 + 1)
first = torch.compile(lambda t: torch.ops.gtowner_a.twin(t) * 3, backend="npugraph", fullgraph=True)
torch.testing.assert_close(first(x), (x + 1) * 3)
print("compiled")
"""


def test_a_second_op_on_a_custom_type_is_refused_at_load_and_blocks_nothing(tmp_path):
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(FIRST)
    second.write_text(SECOND)
    code = textwrap.dedent(SCRIPT.format(first=str(first), second=str(second)))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert (f"refused: {second}:6: op 'twin': field 'ge.type': custom GE type GtOwnerTwin is already the type of "
            f"gtowner_a::twin ({first}:3)") in result.stdout
    assert "location: 6 twin ge.type" in result.stdout
    assert "compiled" in result.stdout
