"""The bottom layer: what every stage shares.

Owns the error types users see (`errors`), the one handle type for undoable registrations
(`handles`), the few numeric conventions of NPU kernels (`numerics`) and whether an importable
torch_npu is the installed distribution (`installed`). Imports nothing from
op_plugin; every other package may import it.
"""
