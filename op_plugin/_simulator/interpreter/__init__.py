"""The GE interpreter: runs a GE GraphDef on the CPU (`executor`) with kernels written from CANN's
operator definitions (`kernels`). Imports neither TorchAir nor the rest of the simulator, nor
op_plugin's lowering, registry or YAML spec (an import-linter contract in pyproject.toml)."""
