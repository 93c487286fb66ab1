"""Stage 2: YAML ops become real torch ops.

Owns the per-op state and the decorators that attach Python pieces to it (`op_state`,
`decorators`), argument binding and dtype rules (`binding`), the Meta function generated from
`outputs:` (`meta`), the torch.library registration of schema, kernels and autograd (`library`),
and `load_yaml` / `unload`, all or nothing (`load`).

May import: `op_plugin._base`, `op_plugin._spec`, `op_plugin._ge`, torch. Never TorchAir, the
lowering or the simulator: they hook in through `op_state.add_piece_listener` and `load.add_load_hook`.

Also `piece_modules`: how reference_kernels/, meta/ and converters/ import every module placed in them.
"""
from .op_state import OpState, Piece, detach, find, loaded, qualify, state

__all__ = ["OpState", "Piece", "detach", "find", "loaded", "qualify", "state"]
