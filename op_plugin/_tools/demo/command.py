"""`op-plugin demo`."""
from __future__ import annotations

from .._shared.command import Command


class DemoCommand(Command):
    name = "demo"
    help = "run the demo model eagerly, through Meta functions and compiled"

    def run(self, args) -> int:
        from .model import run_demo

        return run_demo()
