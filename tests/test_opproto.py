"""op-plugin opproto: GE prototypes (REG_OP) and infer functions generated from the YAML.

Checked here: the generated C++ compiles with g++ against the torch-npu wheel's CANN headers
(`graph/operator_reg.h`, `operator.h`, `tensor.h`), and the infer logic, compiled against a
stand-in for the few graph calls it makes (tests/data/opproto_standin/), gives the shapes and
dtypes of the op's Meta function (FakeTensorMode, the oracle) on the samples at several sizes.
Only an Ascend host verifies GE running the registered infer function inside a graph build.
"""
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_map

import op_plugin
from op_plugin._ge.values import TORCH_TO_GE, ge_dtype_to_torch
from op_plugin._registry.binding import bind
from op_plugin._registry.load import parse_yaml, unload
from op_plugin._simulator.hosting.install import simulator_dir
from op_plugin._spec.ge_prototype import ge_outputs
from op_plugin._tools.ascend_c.opproto import opproto_sources, write_sources
from op_plugin.cli import main
from op_plugin.testing import sample_cases

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = simulator_dir() / "torch_npu" / "include"
STANDIN = ROOT / "tests" / "data" / "opproto_standin"
USER_YAML = ROOT / "tests" / "data" / "opproto_user_ops.yaml"
SHIPPED = sorted(str(p) for p in (ROOT / "yaml").glob("*.yaml"))
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def _specs(*paths):
    return [spec for path in paths for spec in parse_yaml(path)]


def _gpp(*args, timeout=300):
    done = subprocess.run(["g++", "-std=c++17", *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("opproto")
    result = opproto_sources(_specs(*SHIPPED, USER_YAML))
    write_sources(result, out)
    return out, result


def test_prototypes_and_infer_functions_compile_against_the_wheels_headers(generated):
    out, result = generated
    assert {t for _, t in result.generated} == {"NpuCustomScaledSoftmax", "NpuCustomKvCacheUpdate", "NpuOppTile",
                                                "NpuOppStackTo", "NpuOppReverse", "NpuOppFill"}
    sources = sorted(out.glob("*.cc"))
    unit = out / "all_protos.cc"
    unit.write_text("".join(f'#include "{s.name}"\n' for s in sources))
    _gpp("-fsyntax-only", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", f"-I{out}", unit)


def test_prototype_matches_the_ir_the_converter_emits(generated):
    out, _ = generated
    header = (out / "npu_opp_stack_to.h").read_text()
    assert ".DYNAMIC_INPUT(xs, TensorType({DT_FLOAT}))" in header
    assert (".OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT, DT_DOUBLE, DT_INT8, DT_INT16, DT_INT32, DT_INT64, "
            "DT_UINT8, DT_BOOL}))") in header  # dst can name any
    assert ".OUTPUT(info, TensorType({DT_INT64}))" in header
    assert ".REQUIRED_ATTR(dst, Type)" in header and ".REQUIRED_ATTR(N, Int)" in header
    fill = (out / "npu_opp_fill.h").read_text()  # `-> ()`: the mutated inputs are ref outputs, in argument order
    assert fill.index(".OUTPUT(x,") < fill.index(".OUTPUT(y,")


@pytest.fixture(scope="module")
def driver(generated):
    """One program running every generated infer function on the stand-in: reads `op T`, `in`,
    `dyn`, `int`, `ints`, `dtype` lines, then `run`; prints the outputs the function set."""
    out, result = generated
    includes = "".join(f'#include "{path.name}"\n' for path in sorted(out.glob("*.cc")) if path.name != "all_protos.cc")
    dispatch = "".join(f'  if (type == "{t}") '
                       f'return op_plugin_infer::Infer{t}<standin::Operator, standin::Shape>(op);\n'
                       for _, t in result.generated)
    source = out / "driver.cpp"
    source.write_text(f"""#include <iostream>
#include <sstream>
#include "ge_standin.h"
{includes}
static uint32_t Dispatch(const std::string &type, standin::Operator &op) {{
{dispatch}  return 0xEEEEEEEEU;
}}
static standin::TensorDesc Desc(std::istringstream &in) {{
  int dtype; in >> dtype;
  std::vector<int64_t> dims; int64_t d;
  while (in >> d) dims.push_back(d);
  standin::TensorDesc desc; desc.SetShape(standin::Shape(dims)); desc.SetDataType(static_cast<ge::DataType>(dtype));
  return desc;
}}
int main() {{
  std::string line, type; standin::Operator op;
  while (std::getline(std::cin, line)) {{
    std::istringstream in(line); std::string cmd, name; in >> cmd >> name;
    if (cmd == "op") type = name;
    else if (cmd == "in") op.inputs[name] = Desc(in);
    else if (cmd == "dyn") op.dynamic_inputs[name].push_back(Desc(in));
    else if (cmd == "int") in >> op.ints[name];
    else if (cmd == "ints") {{ int64_t v; auto &l = op.int_lists[name]; while (in >> v) l.push_back(v); }}
    else if (cmd == "dtype") {{ int v; in >> v; op.dtypes[name] = static_cast<ge::DataType>(v); }}
    else if (cmd == "run") {{
      std::cout << "status " << Dispatch(type, op) << "\\n";
      for (const auto &o : op.updated) {{
        std::cout << "out " << o << " " << static_cast<int>(op.outputs[o].GetDataType());
        for (int64_t d : op.outputs[o].GetShape().GetDims()) std::cout << " " << d;
        std::cout << "\\n";
      }}
      std::cout << "end" << std::endl;
      op = standin::Operator();
    }}
  }}
}}
""")
    binary = out / "driver"
    _gpp("-O0", "-DOP_PLUGIN_INFER_ONLY", f"-I{INCLUDE}", f"-I{STANDIN}", f"-I{out}", source, "-o", binary)
    return binary


def _commands(spec, args, kwargs, dims_of=None) -> list[str]:
    _, _, bound = bind(spec, args, kwargs)
    lines = [f"op {spec.ge.type}"]
    for ge_input in spec.ge.inputs:
        value = bound.get(ge_input.arg)
        for tensor in (value if isinstance(value, (list, tuple)) else [value]):
            if tensor is None:
                continue
            shape = " ".join(map(str, dims_of(tensor) if dims_of else tensor.shape))
            kind = "dyn" if isinstance(value, (list, tuple)) else "in"
            lines.append(f"{kind} {ge_input.ge_name} {TORCH_TO_GE[tensor.dtype]} {shape}")
    for attr in spec.ge.attrs:
        value = attr.value(bound)
        if isinstance(value, torch.dtype):
            lines.append(f"dtype {attr.ge_name} {TORCH_TO_GE[value]}")
        elif isinstance(value, bool) or not isinstance(value, (int, list, tuple)):
            continue  # floats, strings and bools never enter a size rule
        elif isinstance(value, int):
            lines.append(f"int {attr.ge_name} {value}")
        else:
            lines.append(f"ints {attr.ge_name} {' '.join(map(str, value))}")
    return lines + ["run"]


def _run(driver, batches: list[list[str]]) -> list[tuple[int, list]]:
    done = subprocess.run([str(driver)], input="\n".join(sum(batches, [])) + "\n", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results, current = [], None
    for line in done.stdout.splitlines():
        words = line.split()
        if words[0] == "status":
            current = (int(words[1]), [])
        elif words[0] == "out":
            current[1].append((words[1], ge_dtype_to_torch(int(words[2])), [int(w) for w in words[3:]]))
        else:
            results.append(current)
    return results


def _meta(case, args, kwargs):
    """What the op's Meta function says each GE output is: (name, dtype, shape) in GE output order."""
    spec = case.spec
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake_args, fake_kwargs = tree_map(lambda v: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v,
                                          (args, kwargs))
        result = case.op(*fake_args, **fake_kwargs)
    returned = [] if result is None else list(result) if isinstance(result, (tuple, list)) else [result]
    _, _, bound = bind(spec, args, kwargs)
    names = ge_outputs(spec)
    tensors = returned[: len(spec.ge.outputs)] + [bound[next(i.arg for i in spec.ge.inputs if i.ge_name == n)]
                                                  for n in names[len(spec.ge.outputs):]]
    return [(n, t.dtype, list(t.shape)) for n, t in zip(names, tensors, strict=True)]


@pytest.fixture(scope="module")
def user_ops():
    op_plugin.load_yaml(USER_YAML)
    yield [case for case in sample_cases() if case.spec.location.file.endswith("opproto_user_ops.yaml")]
    unload("npu_opp_tile")


def _custom_cases(user_ops):
    shipped = [c for name in ("npu_custom_scaled_softmax", "npu_custom_kv_cache_update_") for c in sample_cases(name)]
    return shipped + user_ops


def test_infer_functions_agree_with_the_meta_functions(driver, user_ops):
    cases, batches, expected = [], [], []
    for case in _custom_cases(user_ops):
        for dims in case.variants(4):
            args, kwargs = case.inputs(dims, seed=3)
            cases.append((case.id, dims))
            batches.append(_commands(case.spec, args, kwargs))
            expected.append(_meta(case, args, kwargs))
    assert len(cases) >= 40
    for (case_id, dims), want, (status, got) in zip(cases, expected, _run(driver, batches), strict=True):
        assert status == 0, (case_id, dims)
        assert got == [(n, d, s) for n, d, s in want], (case_id, dims)


def test_unknown_dims_stay_unknown_and_unknown_rank_says_so(driver, user_ops):
    (case,) = [c for c in user_ops if c.spec.name == "npu_opp_tile" and c.index == 0]
    args, kwargs = case.inputs()
    unknown_first = _commands(case.spec, args, kwargs, dims_of=lambda t: [-1, *t.shape[1:]])
    unknown_rank = _commands(case.spec, args, kwargs, dims_of=lambda t: [-2])
    (status, got), (status_rank, got_rank) = _run(driver, [unknown_first, unknown_rank])
    assert status == 0 and got[0][2][0] == -1 and got[0][2][1:] == list(args[0].shape[1:]) + [3, 3]
    assert status_rank == 0 and got_rank == [("y", torch.float32, [-2])]


def test_an_index_out_of_range_fails_the_infer_function(driver, user_ops):
    (case,) = [c for c in user_ops if c.spec.name == "npu_opp_tile" and c.index == 0]
    args, kwargs = case.inputs()
    batch = [line for line in _commands(case.spec, args, kwargs) if not line.startswith("ints pad")]
    batch.insert(-1, "ints pad")  # pad[0] of an empty list: the Meta function raises IndexError too
    ((status, _),) = _run(driver, [batch])
    assert status == 0xFFFFFFFF


def test_ops_without_a_size_rule_or_with_unreceived_names_are_refused(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("ops:\n  - func: npu_opp_bad(Tensor x, int n=2) -> Tensor\n"
                    "    outputs: [{size: '[n, *x.shape]', dtype: x}]\n    ge: {type: NpuOppBad, attrs: {}}\n"
                    "  - func: npu_opp_meta(Tensor x) -> Tensor\n    ge: {type: NpuOppMeta}\n")
    bad, meta = parse_yaml(path)
    result = opproto_sources([bad, meta])
    assert result.files == {} and [spec for spec, _ in result.errors] == [bad, meta]
    (_, first), (_, second) = result.errors  # located; one op's problem does not hide the other's
    assert re.match(rf"{re.escape(str(path))}:2: op 'npu_opp_bad': field 'outputs\[0\].size': .*'n', which the GE "
                    "op does not receive", first), first
    assert second.startswith(f"{path}:5: op 'npu_opp_meta': field 'outputs': no `outputs:` rules")


def test_builtin_types_are_skipped_and_the_cli_writes_the_files(tmp_path, capsys):
    assert main(["opproto", *SHIPPED, str(USER_YAML), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "npu_opp_tile.cc" in printed and "RmsNorm" in printed  # a built-in, named as skipped
    assert (tmp_path / "op_plugin_infer.h").is_file() and (tmp_path / "npu_opp_fill.h").is_file()
