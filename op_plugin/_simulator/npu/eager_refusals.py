"""The eager call of a torch_npu op that the CPU simulator defines without an eager kernel (issue 37).

`define_npu_ops()` defines every op of the wheel's schema list; about a hundred have a CPU kernel here, the
others only their schema (and the wheel's Meta function where it has one). Called eagerly such an op ended in
torch's bare "Could not run 'npu::xxx' with arguments from the 'CPU' backend". Each now gets a CPU kernel that
refuses by name, says that the simulator has no eager kernel for it, and whether graph mode can run it instead:

* the wheel has no Python Meta function for it: graph mode cannot trace it either;
* TorchAir has no converter for it (`ge_converter/custom/*.py`, read as text, never imported), or its
  converter only raises: graph mode cannot lower it;
* TorchAir's converter builds GE types the simulator has no kernel for: named;
* otherwise graph mode can run it: `torch.compile(..., backend="npugraph")` around the code that calls it
  (said with a caveat when the converter builds through helpers whose GE types its text does not name). "Can":
  the converter itself may still refuse a call (npu_moe_gating_top_k_softmax_v2's passes attrs its GE type
  does not have, on every host; docs/declared-cases.md).

The GE types are those the converter's module builds by name (`ge.Type(`, `custom_op("Type"`), read from its
source: a converter with several branches may build fewer of them for a given call. The Meta kernel is left
as it is (graph tracing needs it); on the virtual NPU the boxed fallback runs this CPU kernel, so npu tensors
get the same refusal. Which ops run where: docs/torch-npu-ops.md.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from ..._base import wheel as install

DOC = "docs/torch-npu-ops.md"
_REGISTERED = re.compile(r"register_fx_node_ge_converter\(\s*torch\.ops\.npu\.(\w+)\.(\w+)")
_GE_CALL = re.compile(r"\bge\.([A-Z]\w*)\(")                      # ge.DynamicBlockQuant(...)
_CUSTOM_OP = re.compile(r"custom_op\(\s*[\"'](\w+)[\"']")           # torchair.ge.custom_op("LightningIndexer", ...)
_HELPER_CALL = re.compile(r"\bge\.([a-z]\w*)\(")                   # ge.dequant_bias(...): GE types not visible here
_GRAPH_FORMED = ("Const", "Data", "NetOutput")  # nodes the executor handles itself, no kernel needed


@dataclass(frozen=True)
class Converter:
    """What the source of one TorchAir npu converter module shows."""

    source: str                 # its file name
    ge_types: tuple[str, ...]   # the GE types it builds by name
    hidden: bool                # it also builds through helpers whose GE types the text does not name
    refuses: bool               # it only raises (TorchAir's "not implemented / not supported in GE mode")


@functools.lru_cache(maxsize=4)
def torchair_converters(wheel_folder: str) -> dict[str, Converter]:
    """{op ("name" or "name.overload"): what its TorchAir converter builds}, read from the sources of
    TorchAir's npu converters in the unpacked wheel (never imported here)."""
    custom = install.torchair_parent(Path(wheel_folder)) / "torchair" / "_ge_concrete_graph" / "ge_converter" / "custom"
    found: dict[str, Converter] = {}
    for path in sorted(custom.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        types = tuple(sorted((set(_GE_CALL.findall(text)) | set(_CUSTOM_OP.findall(text))) - set(_GRAPH_FORMED)))
        hidden = bool(_HELPER_CALL.findall(text))
        refuses = not types and not hidden and "raise " in text
        for op, overload in _REGISTERED.findall(text):
            found[op if overload == "default" else f"{op}.{overload}"] = Converter(path.name, types, hidden, refuses)
    return found


def graph_mode_note(name: str, traced: bool) -> str:
    """Whether graph mode (npugraph) can run `name` on this CPU host, and why not."""
    if not traced:
        return ("Graph mode cannot run it either: the wheel has no Python Meta function for it (torch_npu writes "
                "its Meta in C++), so torch.compile cannot trace it")
    converter = torchair_converters(str(install.simulator_dir())).get(name)
    if converter is None:
        return "Graph mode cannot run it either: TorchAir has no converter for it"
    if converter.refuses:
        return f"Graph mode cannot run it either: TorchAir's converter ({converter.source}) raises for it"
    from ..interpreter import kernels  # noqa: F401  (registers the GE kernels)
    from ..interpreter.registry import lookup_kernel

    without = [ge_type for ge_type in converter.ge_types if lookup_kernel(ge_type) is None]
    built = ", ".join(converter.ge_types)
    if without:
        return (f"Graph mode cannot run it either: TorchAir's converter ({converter.source}) builds {built}, and "
                f"the simulator has no GE kernel for {', '.join(without)}")
    if converter.hidden or not converter.ge_types:
        return (f"In graph mode TorchAir's converter ({converter.source}) lowers it through helpers whose GE types "
                "are not read here: torch.compile(..., backend=\"npugraph\") runs it if the simulator has kernels "
                "for them (a GE type without one is named by the executor)")
    return (f"Graph mode can run it: TorchAir's converter ({converter.source}) builds {built}, for which the "
            "simulator has GE kernels; call it inside torch.compile(..., backend=\"npugraph\")")


def refusal(name: str, traced: bool) -> str:
    return (f"npu::{name}: the CPU simulator has no eager kernel for this torch_npu op (op_plugin defines its "
            f"schema{' and Meta' if traced else ''} from the torch-npu wheel, not its computation). "
            f"{graph_mode_note(name, traced)}. Which torch_npu ops run eagerly and in graph mode: {DOC}")


def refusing_kernel(name: str, traced: bool):
    """The CPU kernel of an op without an eager kernel: a NotImplementedError (what torch raises for a missing
    kernel, so callers that catch that still do) with `refusal(name, traced)`."""
    def kernel(*args, **kwargs):
        raise NotImplementedError(refusal(name, traced))

    kernel.__name__ = f"no_eager_kernel_{name.replace('.', '_')}"
    return kernel
