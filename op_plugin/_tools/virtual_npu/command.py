"""`op-plugin run -- CMD [ARGS...]`."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from .._shared.command import Command


class RunCommand(Command):
    name = "run"
    help = "run any command (python, pytest, torchrun) with the virtual NPU active"
    description = ("Runs CMD [ARGS...] with OP_PLUGIN_VIRTUAL_NPU=1 in its environment: every Python process it "
                   "starts that imports torch gets an `npu` device (PrivateUse1 renamed, storage in host memory; "
                   "docs/virtual-npu.md), unless the real torch_npu is importable there. The command's exit code "
                   "is passed through; the running environment's bin folder comes first on PATH, so `python`, "
                   "`pytest` and `torchrun` are this environment's. "
                   "Example: op-plugin run -- python train.py --device npu")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--devices", type=int, default=None, metavar="N",
                            help="number of virtual NPUs (sets OP_PLUGIN_VIRTUAL_NPU_COUNT; default 8)")
        parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                            help="the command to run, after --")

    def run(self, args: argparse.Namespace) -> int:
        argv = list(args.argv)
        if argv and argv[0] == "--":
            argv = argv[1:]
        if not argv:
            print("op-plugin run: no command given (usage: op-plugin run -- CMD [ARGS...])", file=sys.stderr)
            return 2
        env = dict(os.environ, OP_PLUGIN_VIRTUAL_NPU="1")
        # `python`, `pytest`, `torchrun` mean this environment's (where op_plugin and its entry point are).
        bin_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")]) if env.get("PATH") else bin_dir
        if args.devices is not None:
            env["OP_PLUGIN_VIRTUAL_NPU_COUNT"] = str(args.devices)
        return run_ending_with_this_process(argv, env)


# Started between op-plugin and CMD: asks the kernel for SIGTERM when op-plugin ends (however it ends: even
# SIGKILL leaves no orphan), checks op-plugin has not ended already, then becomes CMD (exec: CMD keeps the pid,
# and the request outlives the exec). argv: parent pid, the resolved program, CMD's own argv.
_SHIM = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(128 + signal.SIGTERM)
try:
    os.execv(sys.argv[2], sys.argv[3:])
except OSError as error:
    sys.stderr.write("op-plugin run: cannot run %s: %s\\n" % (ascii(sys.argv[3]), error.strerror))
    os._exit(126)
"""


def run_ending_with_this_process(argv: list[str], env: dict) -> int:
    """Run `argv` (looked up on env's PATH) and return its exit code (128 + N when a signal N ended it).
    SIGTERM and SIGHUP sent to op-plugin are passed on to it; on Ctrl-C (which the terminal sends it too)
    it gets two seconds to end before SIGTERM; it never outlives op-plugin."""
    import shutil
    import signal

    from ..._base.paths import shown
    from ..._base.processes import Terminated

    program = shutil.which(argv[0], path=env.get("PATH"))
    if program is None:
        why = "is a folder" if os.path.isdir(argv[0]) else "is not executable" if os.path.exists(argv[0]) \
            else "not found"
        print(f"op-plugin run: command {shown(argv[0])} {why}", file=sys.stderr)
        return 127 if why == "not found" else 126
    proc = subprocess.Popen([sys.executable, "-S", "-c", _SHIM, str(os.getpid()), program, *argv], env=env)
    try:
        code = proc.wait()
    except KeyboardInterrupt as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        if isinstance(stop, Terminated):
            proc.send_signal(signum)  # SIGTERM, SIGHUP: sent to op-plugin alone, so passed on
        code = _wait_then_end(proc, 5.0 if isinstance(stop, Terminated) else 2.0)
        print(f"op-plugin run: stopped by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum
    return 128 - code if code < 0 else code


def _wait_then_end(proc, seconds: float) -> int:
    """The command's exit code once it ends: waited for `seconds`, then sent SIGTERM and given five more,
    then killed."""
    for ending in (None, proc.terminate, proc.kill):
        if ending is not None:
            ending()
        try:
            return proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            seconds = 5.0
    return proc.wait()
