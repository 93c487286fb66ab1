"""What a plan keeps per verified input signature, and the two per-call costs that scale with a graph's
inputs rather than its nodes: the signature itself and the output buffer check.

* `input_signature`: what fixes every node's output dtype and shape (the key of a plan's verified calls);
* `Verified`: the signature's generated program (`program.build_program`), the folded values' storages
  and identities (no output may be one of them);
* `fresh_output`: whether an output certainly has a buffer of its own, without reading the storage
  of every graph input (a model's parameters are graph inputs: hundreds of them).
"""
from __future__ import annotations

from itertools import repeat
from operator import is_
from typing import NamedTuple

import torch

from ..prepared import SMALL_INT_INPUT  # integer inputs up to this many elements enter the signature by value



def input_signature(inputs: list) -> tuple:
    """What fixes every node's output dtype and shape: each input's dtype and shape, and the values
    of small integer inputs and Python scalars (symbolic sizes arrive that way)."""
    parts = []
    append = parts.append
    for value in inputs:
        if isinstance(value, torch.Tensor):
            dtype = value.dtype
            if dtype in _FLOATING or value.numel() > SMALL_INT_INPUT:
                append((dtype, value.shape))
            else:
                append((dtype, value.shape, tuple(value.reshape(-1).tolist())))
        else:
            append(value)
    return tuple(parts)


_FLOATING = frozenset(dtype for dtype in vars(torch).values()
                      if isinstance(dtype, torch.dtype) and dtype.is_floating_point)



class Verified(NamedTuple):
    program: object  # program(inputs) -> the values NetOutput reads
    storages: set  # storages of the folded values (never handed out)
    ids: frozenset  # id() of the folded values
    folded: dict  # slot -> folded value (the program holds them; kept for tools rebuilding it)
    calls: dict  # step -> the call it was prepared with for this signature (idem)
    outputs: tuple  # (dtype, shape) of each graph output on the first call, which passed every output check


def _use_count():
    counter = getattr(torch._C, "_storage_Use_Count", None)
    if counter is None:
        return None, None
    probe = torch.empty(1)
    return counter, counter(probe.untyped_storage()._cdata)


# The reference count of a storage held by one tensor alone, measured the way `fresh_output` measures.
_USE_COUNT, _SOLE_OWNER = _use_count()


def fresh_output(tensor: torch.Tensor, inputs: list, earlier: list, kept_ids) -> bool:
    """True when `tensor` certainly shares its buffer with none of `inputs`, `earlier` outputs or the
    objects in `kept_ids`: no tensor but itself (or, for a view, itself and the base it was taken
    from) holds its storage, and neither it nor that base is one of those tensors. False means:
    check storage by storage."""
    if _USE_COUNT is None:
        return False
    owners = _USE_COUNT(tensor.untyped_storage()._cdata) - _SOLE_OWNER + 1
    base = tensor._base
    if owners == 1:
        held = (tensor,)
    elif owners == 2 and base is not None:  # a view (a Reshape's) of a value the program computed
        held = (tensor, base)
    else:
        return False
    return not any(id(t) in kept_ids or any(map(is_, inputs, repeat(t))) or any(map(is_, earlier, repeat(t)))
                   for t in held)
