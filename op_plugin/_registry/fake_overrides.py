"""A user's `torch.library.register_fake` on a YAML op: it wins, on every host, and says so.

torch lets a later `register_fake` replace an op's fake (Meta) function silently. For a YAML op the
replaced one is op_plugin's: generated from `outputs:` or an `@op_plugin.meta` function. Both hosts
use the user's (torch's rule, unchanged); op_plugin warns once per replacement, naming both, when it
next traces or checks the op (an npugraph compile, `op-plugin test`). Without `outputs:` and
`@op_plugin.meta`, `register_fake` is simply how the op gets its Meta function: nothing to say.
"""
from __future__ import annotations

import warnings

from torch._library.simple_registry import singleton

from . import library
from .op_state import loaded

# where op_plugin's own fake kernels are registered from (torch wraps the function: its source tells)
_OURS = library.__file__
_warned: set[tuple[str, int]] = set()


def replaced_fake(qualname: str):
    """The user's fake kernel (torch's Kernel: func and source) that replaces op_plugin's, or None."""
    kernel = singleton.find(qualname).fake_impl.kernel
    if kernel is None or kernel.source.rpartition(":")[0] == _OURS:
        return None
    return kernel


def warn_replaced_fakes() -> None:
    """Warn once for every loaded YAML op whose op_plugin Meta a register_fake replaced."""
    for st in loaded():
        kernel = replaced_fake(st.qualname)
        if kernel is None or (st.spec.outputs is None and st.meta is None):
            continue
        key = (st.qualname, id(kernel.func))
        if key in _warned:
            continue
        _warned.add(key)
        if st.spec.outputs is not None:
            ours = f"the Meta generated from `outputs:` ({st.spec.field('outputs')})"
        else:
            ours = f"@op_plugin.meta {getattr(st.meta, '__qualname__', st.meta)}"
        warnings.warn(f"{st.qualname}: the torch.library.register_fake function at {kernel.source} replaces "
                      f"{ours}; yours is used on every host (torch's rule), and "
                      "`op-plugin test` checks it against the reference kernel", UserWarning, stacklevel=2)
