"""Planted cases for tests/test_declared_cases.py, imported in each declared-cases worker (--setup).

* `aten.mul.Tensor` cases lose their GE kernel: GE type Mul has no CPU kernel in a worker;
* `planted.crash#1` ends its worker process (os._exit), `planted.hang#1` never returns.
"""
import os
import time

from op_plugin._simulator import load_simulated_torchair
from op_plugin._simulator.interpreter import kernels, registry  # kernels: registered on import, so popped after
from op_plugin._tools.declared.cases import plant_case

load_simulated_torchair()
from torchair._ge_concrete_graph.supported_declaration import F32  # noqa: E402  importable only after load_torchair

if os.environ.get("OP_PLUGIN_DECLARED_CASES_WORKER"):  # never in the process that only lists the cases
    assert kernels.lookup_kernel("Mul") is not None
    registry._kernels.pop("Mul", None)  # a planted missing kernel


def _crash(x):
    os._exit(3)


def _hang(x):
    time.sleep(3600)
    return x


plant_case("planted.crash#1", _crash, F32(2, 3))
plant_case("planted.hang#1", _hang, F32(2, 3))
