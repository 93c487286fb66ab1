"""`op-plugin run -- CMD [ARGS...]`: any command run with the virtual NPU active (command.py;
the device itself is op_plugin/_simulator/device, docs/virtual-npu.md)."""
