"""Issue 25, item 13: the reference pages stay true to the code. docs/api.md documents every public
name; docs/compatibility.md states the pins the code sets; docs/troubleshooting.md quotes the
messages op_plugin really raises (each triggered here, its wording looked up in the page)."""
from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import torch

import op_plugin
from op_plugin import _registry, testing
from op_plugin._base.wheel import TORCH_NPU_VERSION
from op_plugin._registry.load import unload

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_api_page_names_every_public_name():
    page = _page("api.md")
    missing = [n for n in op_plugin.__all__ if f"`{n}" not in page and f"{n}(" not in page and f" {n}" not in page]
    missing += [f"testing.{n}" for n in testing.__all__ if f"`{n}" not in page]
    assert not missing, missing


def test_compatibility_page_states_the_pins_in_force():
    page = _page("compatibility.md")
    torch_pin = next(r for r in importlib.metadata.requires("op_plugin") if r.replace(" ", "").startswith("torch=="))
    assert f"| torch | {torch_pin.split('==')[1]}, exactly |" in page, torch_pin
    assert f"| torch-npu | {TORCH_NPU_VERSION} |" in page
    assert f"| op-plugin | {op_plugin.__version__} |" in page
    assert "[Unreleased]" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


@pytest.fixture
def yaml_op(tmp_path):
    path = tmp_path / "trouble.yaml"
    path.write_text("ops:\n  - func: npu_trouble(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n"
                    "    dtypes: [float32]\n")
    op_plugin.load_yaml(path)
    yield path
    unload("npu_trouble")
    _registry.detach("npu_trouble", _registry.Piece.REFERENCE)


def _raised(fn) -> str:
    with pytest.raises(op_plugin.OpPluginError) as caught:
        fn()
    return str(caught.value)


def test_troubleshooting_quotes_the_real_messages(yaml_op):
    """Each message is triggered; its fixed phrases must be in the message and in the page."""
    page = _page("troubleshooting.md")
    found = [(_raised(lambda: torch.ops.npu.npu_trouble(torch.ones(2))),                 # no reference kernel
              ["has no reference kernel; define one with @op_plugin.reference("])]
    op_plugin.reference("npu_trouble")(lambda x: x)
    found += [(_raised(lambda: torch.ops.npu.npu_trouble(torch.ones(2, dtype=torch.float64))),
               ["argument 'x' has dtype float64; accepted: ", "field 'dtypes'"]),
              (_raised(lambda: op_plugin.npugraph_backend(no_such_option=1)),
               ["npugraph: unknown option(s) ", "; options are mode, dump, "])]
    yaml_op.write_text(yaml_op.read_text() + "    doc: changed\n")
    found.append((_raised(lambda: op_plugin.load_yaml(yaml_op)),
                  ["changed since it was loaded (", "); a registered op cannot be redefined in the same process: "
                   "restart Python, or unload it first"]))
    for message, phrases in found:
        for phrase in phrases:
            assert phrase in message, (phrase, message)
            assert phrase in page, (phrase, "not in docs/troubleshooting.md")
