"""The npugraph backend counting finished compiles (recompile checks; public as
`op_plugin.testing.CountingNpugraph`)."""
from __future__ import annotations


class CountingNpugraph:
    """The npugraph backend, counting finished compiles (a restarted first attempt is not counted)."""

    def __init__(self, **options):
        from ..._backend import npugraph_backend

        self.compiles = 0
        self._backend = npugraph_backend(**options)

    def __call__(self, gm, example_inputs):
        compiled = self._backend(gm, example_inputs)
        self.compiles += 1
        return compiled
