"""tests/test_compare.py runs this in a subprocess: a small model through TorchAir's own backend with
dump_config on the simulator (GE options are process-wide). argv: dump_path [bad: a planted wrong Relu]"""
import sys
import torch
from op_plugin import _simulator

torchair = _simulator.load_simulated_torchair()
config = torchair.CompilerConfig()
config.dump_config.enable_dump = True
config.dump_config.dump_path = sys.argv[1]
config.dump_config.dump_mode = "all"
if len(sys.argv) > 2 and sys.argv[2] == "bad":
    _simulator.register_ge_kernel("Relu", lambda x: torch.relu(x) + 1e-2, replace=True)
backend = torchair.get_npu_backend(compiler_config=config)
torch.manual_seed(0)
def fn(x, w):
    return torch.relu(x @ w).sum(-1) * 2
compiled = torch.compile(fn, backend=backend)
x, w = torch.randn(4, 8), torch.randn(8, 3)
with torch.no_grad():
    compiled(x, w)
    compiled(x, w)
