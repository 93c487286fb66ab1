"""The virtual NPU (op_plugin/_simulator/device, docs/virtual-npu.md), each check in its own process."""
