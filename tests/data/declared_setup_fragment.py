"""A --setup file for tests/test_declared_cases_setup.py: it defines an op through a torch.library
fragment held only by this module's global, and plants a declared case on it. If the tool dropped
the module after importing it, the fragment (and the op) would go at the next garbage collection."""
import functools

import torch

from op_plugin._simulator import load_simulated_torchair
from op_plugin._tools.declared.cases import plant_case

load_simulated_torchair()
from torchair._ge_concrete_graph.supported_declaration import F32  # noqa: E402  importable only after load_torchair

_fragment = torch.library.Library("declsetup", "FRAGMENT")
_fragment.define("scaled_add(Tensor x, Tensor y) -> Tensor")
# a kernel that holds no reference to this module (a lambda here would keep the module, and the fragment,
# alive through its __globals__: setup files defining ops by schema and Meta alone have none either)
_fragment.impl("scaled_add", functools.partial(torch.add, alpha=2), "CompositeImplicitAutograd")

plant_case("declsetup.scaled_add.default#1", torch.ops.declsetup.scaled_add.default, F32(2, 3), F32(2, 3))
