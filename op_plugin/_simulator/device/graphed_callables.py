"""`torch.npu.make_graphed_callables` on the virtual NPU (issue 33 item 2).

torch's `torch.cuda.make_graphed_callables` hardcodes `torch.cuda` (`CUDAGraph`, `torch.cuda.graph`, `Stream`,
`synchronize`, `graph_pool_handle`), so it cannot be pointed at another device. This module implements the same
algorithm (torch's and torch-npu 2.13.0's `torch_npu/npu/graphs.py`; same steps, same messages) on
`graphs.NPUGraph`: warm-up iterations on a side stream, the forward graphs captured in order, then the backward
graphs (a `torch.autograd.grad` of each callable's outputs with respect to its inputs and parameters, run under
capture: the recorder sees the backward's aten ops, the autograd engine's device thread included) in reverse order,
and each callable wrapped in an `autograd.Function` whose forward copies new inputs into the static inputs and
replays the forward graph, and whose backward copies the incoming gradients into the static grad outputs and replays
the backward graph. A module keeps its identity: its `forward` is replaced (the graphs run while its `training` flag
is the one it was graphed with, the original forward otherwise).

Errors are torch_npu's (RuntimeError, torch raises AssertionError) with the call named first; an input unused
by the outputs is refused by `torch.autograd.grad` itself during the warm-up, as on hardware, unless
`allow_unused_input=True`.

Differences from hardware: `pool` is accepted and unused (the virtual NPU pools no memory, each graph keeps its
own tensors alive); nothing is faster (graphs.py: the replays rerun the aten ops one by one on the CPU); the
warm-up's side stream is a name (nothing runs concurrently).
"""
from __future__ import annotations

import torch
from torch.utils._pytree import arg_tree_leaves, tree_flatten, tree_leaves, tree_unflatten

from .graphs import NPUGraph, graph

CALL = "torch.npu.make_graphed_callables"


def _check(callables, sample_args) -> list[tuple[torch.Tensor, ...]]:
    if not isinstance(sample_args, (tuple, list)) or len(sample_args) != len(callables):
        raise RuntimeError(f"{CALL}: sample_args must hold one tuple of Tensors per callable ({len(callables)} "
                           f"callables)")
    flatten_sample_args = []
    for c, args in zip(callables, sample_args, strict=True):
        if not isinstance(args, (tuple, list)):
            raise RuntimeError(f"{CALL}: the sample_args of a callable must be a tuple of Tensors, got "
                               f"{type(args).__name__}")
        if isinstance(c, torch.nn.Module):
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise RuntimeError(f"{CALL}: Modules must not have hooks registered at the time they are passed. "
                                   f"However, registering hooks on modules after passing them through "
                                   f"make_graphed_callables is allowed.")
            if any(b.requires_grad for b in c.buffers()):
                raise RuntimeError(f"{CALL}: In any torch.nn.Module passed to make_graphed_callables, only "
                                   f"parameters may be trainable. All buffers must have requires_grad=False.")
        flatten_arg = tuple(arg_tree_leaves(*args))
        if not all(isinstance(arg, torch.Tensor) for arg in flatten_arg):
            raise RuntimeError(f"{CALL}: In the beta API, sample_args for each callable must contain only Tensors. "
                               f"Other types are not allowed.")
        flatten_sample_args.append(flatten_arg)
    return flatten_sample_args


def _grad(outputs, surface, grad_outputs, allow_unused_input):
    return torch.autograd.grad(outputs=outputs, inputs=tuple(i for i in surface if i.requires_grad),
                               grad_outputs=grad_outputs, only_inputs=True, allow_unused=allow_unused_input)


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):
    """Graphed versions of `callables` (a module or function, or a tuple of them), as
    `torch.cuda.make_graphed_callables` / torch_npu's: each runs its forward as a replay of a captured
    `NPUGraph` inside one autograd node, whose backward replays the captured backward graph."""
    if torch.is_autocast_enabled("npu") and torch.is_autocast_cache_enabled():
        raise RuntimeError(f"{CALL} does not support the autocast caching. Please set `cache_enabled=False`.")
    just_one_callable = not isinstance(callables, tuple)
    if just_one_callable:
        callables, sample_args = (callables,), (sample_args,)
    flatten_sample_args = _check(callables, sample_args)

    # A module's graph has as inputs the args the user passes (its sample_args) and the module's parameters.
    len_user_args = [len(args) for args in flatten_sample_args]
    module_params = [tuple(c.parameters()) if isinstance(c, torch.nn.Module) else () for c in callables]
    surfaces = [flatten_sample_args[i] + module_params[i] for i in range(len(callables))]
    fwd_graphs = [NPUGraph() for _ in callables]
    bwd_graphs = [NPUGraph() for _ in callables]

    # Warm-up (on hardware it keeps lazy initialisation out of the captures).
    torch.npu.synchronize()
    with torch.npu.stream(torch.npu.Stream()):
        for func, args, surface in zip(callables, sample_args, surfaces, strict=True):
            for _ in range(num_warmup_iters):
                outputs = tree_leaves(func(*args))
                outputs_grad = tuple(o for o in outputs if o.requires_grad)
                if outputs_grad:
                    _grad(outputs_grad, surface, tuple(torch.empty_like(o) for o in outputs_grad),
                          allow_unused_input)
            outputs = outputs_grad = None
    torch.npu.synchronize()

    # Forward graphs in order, then backward graphs in reverse order: the order they run in.
    static_outputs, output_specs = [], []
    for func, args, fwd_graph in zip(callables, sample_args, fwd_graphs, strict=True):
        with graph(fwd_graph, pool=pool):
            func_outputs = func(*args)
        flatten_outputs, spec = tree_flatten(func_outputs)
        static_outputs.append(tuple(flatten_outputs))
        output_specs.append(spec)

    static_grad_outputs, static_grad_inputs = [], []
    for surface, outputs, bwd_graph in zip(reversed(surfaces), reversed(static_outputs), reversed(bwd_graphs),
                                           strict=True):
        grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in outputs)
        outputs_grad = tuple(o for o in outputs if o.requires_grad)
        grad_inputs = None
        if outputs_grad:
            with graph(bwd_graph, pool=pool):
                grad_inputs = _grad(outputs_grad, surface, tuple(g for g in grad_outputs if g is not None),
                                    allow_unused_input)
        # One slot per input of the surface: the captured gradient, None for inputs that do not require grad.
        grads = iter(grad_inputs or ())
        static_grad_outputs.append(grad_outputs)
        static_grad_inputs.append(tuple(next(grads) if arg.requires_grad and grad_inputs is not None else None
                                        for arg in surface))
    static_grad_outputs.reverse()
    static_grad_inputs.reverse()

    ret = []
    for i, func in enumerate(callables):
        graphed = _graphed_function(fwd_graphs[i], bwd_graphs[i], module_params[i], len_user_args[i],
                                    output_specs[i], surfaces[i], static_outputs[i], static_grad_outputs[i],
                                    static_grad_inputs[i])
        if isinstance(func, torch.nn.Module):
            func.forward = _graphed_forward(func, func.training, graphed, func.forward)
            ret.append(func)
        else:
            ret.append(graphed)
    return ret[0] if just_one_callable else tuple(ret)


def _graphed_function(fwd_graph, bwd_graph, module_params, len_user_args, output_spec, surface, static_outputs,
                      static_grad_outputs, static_grad_inputs):
    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            # Only the user args may be new tensors; the parameters are the captured ones.
            for i in range(len_user_args):
                if surface[i].data_ptr() != inputs[i].data_ptr():
                    surface[i].copy_(inputs[i])
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            if len(grads) != len(static_grad_outputs):
                raise RuntimeError(f"{CALL}: {len(grads)} gradients for {len(static_grad_outputs)} outputs")
            for static, grad in zip(static_grad_outputs, grads, strict=True):
                if static is not None and static.data_ptr() != grad.data_ptr():
                    static.copy_(grad)
            bwd_graph.replay()
            return tuple(b.detach() if b is not None else None for b in static_grad_inputs)

    def functionalized(*user_args):
        # The autograd function's inputs: every graph input that may require grad (user args, then parameters).
        out = Graphed.apply(*(tuple(arg_tree_leaves(*user_args)) + module_params))
        return tree_unflatten(out, output_spec)

    return functionalized


def _graphed_forward(module, graph_training_state, graphed, orig_fwd):
    def new_fwd(*user_args):
        # The graphs run while the module's training flag is the graphed one; the original forward otherwise.
        if module.training == graph_training_state:
            return graphed(*user_args)
        return orig_fwd(*user_args)

    return new_fwd
