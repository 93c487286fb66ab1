"""`op-plugin setup-simulator`: unpack the pinned torch-npu wheel beside the environment (command.py)."""
