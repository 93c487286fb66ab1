"""Hostile or careless input costs bounded time and memory and ends in a located error: YAML
nesting and alias bombs, validator gaps, run-time size failures, huge sample ranges. Processes
that could blow up run in a child with a memory cap and a hang guard (not a speed assertion)."""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin._registry import detach
from op_plugin._registry.load import unload
from op_plugin._spec import parse as spec_parse

CLI = str(Path(sys.executable).with_name("op-plugin"))
MEMORY_CAP = 3 * 1024 ** 3


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "validate", str(path)], capture_output=True, text=True, timeout=300,
                          preexec_fn=_capped)


def test_deep_nesting_is_a_located_error_not_a_crash(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("ops:\n  - func: npu_deep(Tensor x) -> Tensor\n    doc: " + "[" * 30000 + "]" * 30000 + "\n")
    result = _validate(path)
    assert result.returncode == 1, (result.returncode, result.stderr[-500:])   # -11 was a segfault
    assert f"{path}:3: lists and mappings are nested more than 64 deep" in result.stderr


def test_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\nops: []\n")
    result = _validate(path)
    assert result.returncode == 1, (result.returncode, result.stderr[-500:])
    assert "the file expands to more than 200000 values" in result.stderr


def test_a_validator_gap_is_still_a_located_error(tmp_path, monkeypatch):
    def broken_dims(p, raw):
        raise KeyError("simulated gap")

    monkeypatch.setattr(spec_parse, "_parse_dims", broken_dims)
    path = tmp_path / "gap.yaml"
    path.write_text("ops:\n  - func: npu_gap(Tensor x) -> Tensor\n")
    with pytest.raises(op_plugin.YamlSpecError, match=r"gap.yaml:2: op 'npu_gap': cannot validate this op: "
                                                      r"KeyError: 'simulated gap'") as info:
        op_plugin.load_yaml(path)
    assert isinstance(info.value.__cause__, KeyError)


SIZES = """
    ops:
      - func: npu_probe_split(Tensor x, int n) -> Tensor
        outputs: [{size: "[x.shape[0] // n, x.shape[3]]", dtype: x}]
      - func: npu_probe_shrink(Tensor x, int n) -> Tensor
        outputs: [{size: "[x.shape[0] - n]", dtype: x}]
"""


@pytest.fixture
def size_ops(tmp_path):
    path = tmp_path / "sizes.yaml"
    path.write_text(textwrap.dedent(SIZES))
    names = op_plugin.load_yaml(path)
    yield path
    unload(names[0])
    for name in names:
        detach(name, "reference")


@pytest.mark.parametrize("call, shape, n, message", [
    ("npu_probe_split", (4, 2, 2, 2), 0, "ZeroDivisionError"),
    ("npu_probe_split", (4, 2), 2, "IndexError"),
    ("npu_probe_shrink", (4,), 10, "gives [-6] for this call; sizes cannot be negative"),
])
def test_run_time_size_errors_name_the_op_and_field(size_ops, call, shape, n, message):
    line = 3 if call == "npu_probe_split" else 5
    with pytest.raises(op_plugin.OpPluginError) as info:
        getattr(torch.ops.npu, call)(torch.empty(shape, device="meta"), n)
    text = str(info.value)
    assert text.startswith(f"{size_ops}:{line}: op '{call}': field 'outputs[0].size': npu::{call}: size '")
    assert message in text


def test_unique_sample_from_a_huge_range_stays_small(tmp_path):
    path = tmp_path / "unique.yaml"
    path.write_text(textwrap.dedent("""
        ops:
          - func: npu_probe_positions(Tensor p) -> Tensor
            outputs: [{size: p.shape, dtype: p}]
            samples: [{p: [int64, [6], {low: 0, high: 100000000000, unique: true}]}]
    """))
    code = textwrap.dedent(f"""
        import op_plugin
        from op_plugin.testing import sample_cases
        op_plugin.load_yaml({str(path)!r})
        (case,) = sample_cases("npu_probe_positions")
        (p,), _ = case.inputs()
        values = p.tolist()
        assert len(set(values)) == 6 and all(0 <= v < 100000000000 for v in values), values
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            preexec_fn=_capped)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-1000:]


# ---------------------------------------------------------------- the YAML file itself (issue 26)

def test_a_device_is_refused_without_reading_it(tmp_path):
    """/dev/zero has size 0 to `stat` and never ends: the bound is on what is read."""
    result = _validate(Path("/dev/zero"))
    assert result.returncode == 1, (result.returncode, result.stderr[-500:])
    assert "error: /dev/zero:1: the path is a device, not a regular file" in result.stderr


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "ops.yaml"
    os.mkfifo(fifo)
    result = subprocess.run([CLI, "validate", str(fifo)], capture_output=True, text=True, timeout=120,
                            preexec_fn=_capped)
    assert result.returncode == 1 and f"{fifo}:1: the path is a FIFO (named pipe), not a regular file" in result.stderr


def test_a_file_larger_than_stat_said_is_still_bounded(tmp_path, monkeypatch):
    """A file growing between `stat` and the read: the bound holds on the bytes read."""
    path = tmp_path / "grows.yaml"
    path.write_bytes(b"ops: []\n" + b"#" * (5 * 1024 * 1024) + b"\n")
    small = os.stat_result((0o100644, 0, 0, 1, 0, 0, 100, 0, 0, 0))
    real_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda self, **kw: small if self == path else real_stat(self, **kw))
    with pytest.raises(op_plugin.YamlSpecError, match=r"grows.yaml:1: the file has more than 4194304 bytes"):
        op_plugin.load_yaml(path)


# ---------------------------------------------------------------- TorchAir's dump_step (issue 26)

def test_a_huge_dump_step_range_stays_a_range():
    """dump_step "0-4000000000" once became a set of four billion numbers."""
    code = textwrap.dedent("""
        from op_plugin._simulator.hosting.data_dump import parse_steps
        steps = parse_steps("0-4000000000|4000000005|7-9")
        assert 0 in steps and 3999999999 in steps and 4000000000 in steps and 4000000005 in steps
        assert 4000000001 not in steps and -1 not in steps
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-1000:]


@pytest.mark.parametrize("text", ["a", "3-1", "1-", "-2", "1-2-3"])
def test_a_malformed_dump_step_names_the_part(text):
    from op_plugin._simulator.hosting.data_dump import parse_steps

    with pytest.raises(ValueError, match=rf"dump_step .*{re.escape(repr(text.split('|')[0]))} is not a step"):
        parse_steps(text)
