"""Dynamo's collective remaps on a CPU host: TorchAir loaded at the first trace of a distributed process.

On an Ascend host `import op_plugin` imports TorchAir, whose import adds its traceable-collective remaps
(`distributed.py` says which); the simulator imports TorchAir only at the first npugraph compile.
`load_torchair_before_collectives_trace()` (called by `import op_plugin` on a CPU host) closes that
gap without loading TorchAir in processes that never need it: the remap table dynamo consults
(`torch.distributed._functional_collectives.traceable_collective_remaps`, read by dynamo at trace
time) becomes a dict that, the first time dynamo looks a function up in it while
torch.distributed is initialized, loads the simulator's TorchAir, whose import adds its remaps to
that same dict before the lookup is answered. A process without an initialized process group never
pays for it; one with it loads TorchAir at its first trace (as an Ascend host does at import).
"""
from __future__ import annotations

import threading

import torch

_lock = threading.Lock()
_settled = False  # TorchAir is loaded, or cannot be: the remap table is a plain lookup again


class _RemapsLoadingTorchAir(dict):
    """torch's traceable-collective remap table, which loads the simulator's TorchAir (and so its
    remaps) on the first lookup made while torch.distributed is initialized."""

    def __contains__(self, key) -> bool:
        if not _settled:
            _load_if_distributed()
        return super().__contains__(key)


def _load_if_distributed() -> None:
    global _settled
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return
    with _lock:
        if _settled:
            return
        _settled = True
        from . import install, loader  # the loader imports the npu ops: only in a process that traces

        if install.missing_parts(install.simulator_dir()):
            return  # an npugraph compile says how to install it; other backends are not held up
        try:
            loader.load_torchair()
        except Exception:  # an npugraph compile reports it; other backends trace on
            return


def load_torchair_before_collectives_trace() -> None:
    """Make dynamo's remap table load TorchAir's remaps at the first trace of a distributed process, and start
    the thread that publishes this process's liveness in each world it joins (`interpreter/liveness.py`): a
    rank that dies before its first collective must have published already, and `import op_plugin` no longer
    imports the collectives' module, whose import started it before."""
    if not torch.distributed.is_available():
        return
    from ..interpreter import liveness

    liveness.watch()
    from torch.distributed import _functional_collectives as funcol

    if not isinstance(funcol.traceable_collective_remaps, _RemapsLoadingTorchAir):
        funcol.traceable_collective_remaps = _RemapsLoadingTorchAir(funcol.traceable_collective_remaps)
