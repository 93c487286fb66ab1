"""The bottom layer: what every stage shares.

Owns the error types users see (`errors`), the one handle type for undoable registrations
(`handles`) and the few numeric conventions of NPU kernels (`numerics`). Imports nothing from
op_plugin; every other package may import it.
"""
