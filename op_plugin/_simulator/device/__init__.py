"""The virtual NPU: an `npu` device on a host without Ascend hardware (issue 33, docs/virtual-npu.md).

Active only when `OP_PLUGIN_VIRTUAL_NPU=1` is set and the real torch_npu is not importable; brought
up by the `torch.backends` autoload entry point (`op_plugin_virtual_npu_autoload.py` at the
repository root) during `import torch`, or by `op-plugin run -- CMD`. PrivateUse1 renamed `npu`,
storage in host memory.

Modules: `native` (where the C++ part, `csrc/virtual_npu.cpp`, is built and how it is loaded),
`build` (`python -m op_plugin._simulator.device.build`, run by `make setup`), `activation`
(`activate()`: the rename, the device module, the generated methods, the fallback), `fallback`
(the boxed PrivateUse1 fallback; `implementation_for(op)` decides what runs an aten op: a GE kernel
from `ge_eager.GE_KERNELS`, else the CPU kernel on the same memory), `ge_eager` (aten op -> the GE
kernel npugraph lowers it to), `npu_module` (`torch.npu`: device count and selection, memory
counters, seeding, device properties, the SoC; a named refusal for what is not emulated),
`streams` (`torch.npu.Stream`, `Event`,
`current_stream`, `stream()`: no concurrency, host timing), `graphs` (`torch.npu.NPUGraph`, `graph()`: capture
records the aten ops, replay reruns them into the captured tensors), `torch_npu_facade` (`import torch_npu`
while active), `torchair_branches` (what TorchAir's NPU-device branches read from torch_npu), `graph_io` (a GE
graph's npu inputs as CPU views of their memory, its results handed back as npu tensors).

May import `op_plugin._base`, the `npu` and `interpreter` jobs and torch; never `hosting`. The
modules import nothing from op_plugin at their top beyond this package, so activation inside
`import torch` stays small.
"""
