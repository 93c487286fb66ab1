"""The decorators that attach Python pieces to a YAML op. They may run before or after load_yaml."""
from __future__ import annotations

from collections.abc import Callable

from .op_state import Piece, attach, qualify


def _piece_decorator(piece: Piece, doc: str) -> Callable:
    def decorator_factory(op_name: str) -> Callable[[Callable], Callable]:
        qualify(op_name)  # reject a bad name at decoration time

        def decorate(fn: Callable) -> Callable:
            return attach(op_name, piece, fn)

        return decorate

    decorator_factory.__name__ = piece.value
    decorator_factory.__doc__ = doc
    return decorator_factory


reference = _piece_decorator(Piece.REFERENCE, """Register the eager kernel of a YAML op (runs on every device).

    @op_plugin.reference("npu_layer_scale")
    def layer_scale(x, gamma, eps): ...

The function gets the op's arguments in schema order (defaults filled in) and returns what the
schema returns. For in-place ops it mutates and returns the `Tensor(a!)` argument.""")

meta = _piece_decorator(Piece.META, """Register the Meta (fake) function of a YAML op that has no `outputs:` rule.

It gets fake tensors and must return empty tensors of the right shape, dtype and device; use
SymInt-friendly code (x.shape, torch.sym_max, ...) so dynamic shapes stay dynamic.""")

backward = _piece_decorator(Piece.BACKWARD, """Register the backward of a functional YAML op.

Same contract as torch.library.register_autograd: `backward(ctx, *grads)` returns one gradient
(or None) per op argument. Save what it needs with @op_plugin.setup_context.""")

setup_context = _piece_decorator(Piece.SETUP_CONTEXT, """Register the setup_context of a YAML op's autograd.

Same contract as torch.library.register_autograd: `setup_context(ctx, inputs, output)` (plus
`keyword_only_inputs` when the schema has keyword-only arguments).""")

converter = _piece_decorator(Piece.CONVERTER, """Register a hand-written GE converter for a YAML op.

The function has the op's arguments (as GE tensors and Python attrs) plus an optional
`meta_outputs` parameter, as torchair.register_fx_node_ge_converter expects. It replaces the
converter generated from the YAML `ge:` mapping.""")
