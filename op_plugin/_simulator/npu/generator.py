"""The NPU generator's seed/offset protocol, emulated on the CPU simulator.

How TorchAir draws random numbers: every random converter (rand, randn, randint, uniform,
bernoulli, dropout, randperm, multinomial, SDPA dropout) calls ``get_ge_rng_state(philox_num)``,
which asks the GE graph's ``_GraphRngState`` (``torchair/ge/_ge_graph.py``) for a ``(seed, offset)``
pair. The seed is a Const baked at lowering, ``generator.initial_seed()``; the offsets are one
int64 Data input (``offset_list``) fed before every run by ``_GraphRngState.consume()``: it reads
``generator.get_offset()``, reserves ``4 * ceil(philox_num / 4)`` counters per random op with
``set_offset(offset + reserved)``, and feeds ``offset + [0, reserved_0, ...]``. On an Ascend host
the generator is ``torch.npu.default_generators[device]`` (Philox; ``torch.manual_seed`` reseeds
it and resets its offset to 0). Without torch_npu TorchAir falls back to ``torch.manual_seed(10)``
(reseeding the user's CPU generator at every lowering) and ``torch.default_generator``, whose
``get_offset`` raises "CPU Generator does not use offset".

``install(torchair)`` gives TorchAir's graphs ``npu_generator()`` instead, a stand-in for the NPU
default generator that follows torch's CPU default generator:

* its seed is ``torch.default_generator.initial_seed()`` (so ``torch.manual_seed(s)`` sets it);
* its offset starts at 0, advances by what each run reserves, and returns to 0 when
  ``torch.manual_seed`` is called again: a reseed is seen as the CPU generator being back in its
  freshly seeded state. To tell a reseed with the same seed from "nothing happened", every
  ``set_offset`` draws one number from the CPU generator (so CPU random numbers drawn after a
  compiled random graph differ from a run without it, as they would after an eager CPU random op).
  A reseed followed by CPU draws before the next compiled run is not seen: the offset then keeps
  counting (the numbers still differ between runs and repeat under the same seed and call order).

The GE random kernels (``interpreter/kernels/random/random.py``) turn ``(seed, offset)`` into numbers with
their ``stream(seed, offset)``: torch's CPU generator seeded with a 64-bit mix of the pair. Not Philox,
so the numbers can never equal an NPU's or CPU eager's bit for bit; what holds is shape, dtype,
value range, distribution, and determinism: the same seed and offset give the same numbers, a
different offset (the next run) gives different ones.

Seeds are 64-bit unsigned (``torch.manual_seed(-1)`` or ``torch.seed()`` give seeds >= 2**63), and
TorchAir bakes ``initial_seed()`` into an int64 Const: the emulated generator reports the seed's
64 bits as a signed int64 (two's complement), the bits the random kernels read. (torch_npu's NPU
generator returns the unsigned value; TorchAir's Const then overflows on an Ascend host for seeds
>= 2**63: docs/npu-faithful-lowering.md.)

Activation checkpointing (``torch.utils.checkpoint``) saves the generator's state before a random op
(``run_and_save_rng_state``) and replays the op with it in the recomputation
(``run_with_rng_state``). An NPU's state is ``torch.npu.get_rng_state()``: 16 bytes, the uint64 seed
then the int64 offset, little-endian (torch_npu's NPUGeneratorImpl, as CUDA's). ``get_state`` gives
the same layout, and while TorchAir compiles, the traced state of a CPU-host graph is this one
(``install``), not the 5,056-byte CPU generator state torch's CPU path would record; op_plugin's
converters of the two higher-order ops (``op_plugin/_lowering/rng_converters.py``) build it from the
(seed, offset) pair in the GE graph.
"""
from __future__ import annotations

import functools
import importlib
import threading

import torch
from torch.utils._python_dispatch import _disable_current_modes

_MASK64 = (1 << 64) - 1
_STATE_BYTES = 16  # torch_npu's generator state: uint64 seed, int64 offset


def signed64(value: int) -> int:
    """The 64 bits of `value` read as a signed int64 (two's complement)."""
    value = int(value) & _MASK64
    return value - (1 << 64) if value >> 63 else value


class SimulatedNpuGenerator:
    """The part of torch_npu's NPU generator TorchAir uses: initial_seed, get_offset, set_offset."""

    def __init__(self):
        self._lock = threading.Lock()
        self._seed = None
        self._offset = 0
        self._mark = None  # the CPU generator's state right after our last set_offset

    # TorchAir asks for the seed while lowering, under dynamo's fake-tensor mode: the generator's own
    # tensor work (state comparisons, one draw) runs with every dispatch mode set aside.

    def initial_seed(self) -> int:
        """The seed's 64 bits as a signed int64 (TorchAir stores it in an int64 Const)."""
        with self._lock, _disable_current_modes():
            self._follow_cpu_generator()
            return signed64(self._seed)

    def get_state(self) -> torch.Tensor:
        """torch_npu's layout of the state: 16 uint8, the seed then the offset, little-endian."""
        with self._lock, _disable_current_modes():
            self._follow_cpu_generator()
            pair = torch.tensor([signed64(self._seed), self._offset], dtype=torch.int64)
            return pair.view(torch.uint8).clone()

    def get_offset(self) -> int:
        with self._lock, _disable_current_modes():
            self._follow_cpu_generator()
            return self._offset

    def set_offset(self, offset: int) -> None:
        with self._lock, _disable_current_modes():
            self._follow_cpu_generator()
            self._offset = int(offset)
            cpu = torch.default_generator
            torch.empty((), dtype=torch.int64).random_(generator=cpu)  # move off the freshly seeded state
            self._mark = cpu.get_state()

    def manual_seed(self, seed: int) -> SimulatedNpuGenerator:
        """Seed the emulated NPU generator alone (torch.manual_seed seeds it too)."""
        with self._lock, _disable_current_modes():
            self._seed, self._offset = int(seed) & _MASK64, 0
            self._mark = torch.default_generator.get_state()
        return self

    def _follow_cpu_generator(self) -> None:
        cpu = torch.default_generator
        state = cpu.get_state()
        if self._mark is not None and torch.equal(state, self._mark):
            return  # nothing touched the CPU generator since our last run
        seed = cpu.initial_seed()
        if seed != self._seed or torch.equal(state, _freshly_seeded_state(seed)):
            self._seed, self._offset = seed, 0  # torch.manual_seed was called: NPU offsets restart at 0
        self._mark = state


@functools.lru_cache(maxsize=8)
def _freshly_seeded_state(seed: int) -> torch.Tensor:
    return torch.Generator().manual_seed(seed).get_state()


_generator = SimulatedNpuGenerator()


def npu_generator() -> SimulatedNpuGenerator:
    """The emulated NPU default generator the simulator's TorchAir graphs draw from."""
    return _generator


def install(torchair) -> None:
    """Make every GE graph TorchAir builds draw its seed and offsets from npu_generator(), and
    checkpointed random ops save the NPU generator's state while TorchAir compiles."""
    from torchair.ge import _ge_graph

    if getattr(_ge_graph.map_graph_rng_state, "_op_plugin_simulated", False):
        return
    _install_checkpoint_state(torchair)
    state_class = _ge_graph._GraphRngState

    def map_graph_rng_state(gen=None):
        # GeGraph's defaultdict calls this without a generator; TorchAir would then reseed the CPU
        # generator with 10 and use it, which has no offset.
        return state_class(gen if gen is not None else _generator)

    map_graph_rng_state._op_plugin_simulated = True
    _ge_graph.map_graph_rng_state = map_graph_rng_state


def _install_checkpoint_state(torchair) -> None:
    """While TorchAir compiles (its `_op_plugin_patches` window), `run_and_save_rng_state` on CPU
    tensors records the emulated NPU generator's state (uint8[16], as torch_npu's NPU path does),
    not torch's CPU state (uint8[5056]): the graph TorchAir lowers is then the one an Ascend host
    traces. Outside that window (eager, aot_eager, inductor on the CPU) torch's CPU path is kept."""
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    from torch._prims import rng_prims

    hop = rng_prims.run_and_save_rng_state
    cpu_fake = registered_hop_fake_fns.get(hop)
    if cpu_fake is None or getattr(cpu_fake, "_op_plugin_simulated", False):
        return
    compiler = importlib.import_module(f"{torchair.__name__}.npu_fx_compiler")

    def fake(op, *args, **kwargs):
        patches = getattr(compiler, "_op_plugin_patches", None)
        if patches is None or not patches.compiling or rng_prims.get_device(args, kwargs) != "cpu":
            return cpu_fake(op, *args, **kwargs)
        return _generator.get_state(), op(*args, **kwargs)

    fake._op_plugin_simulated = True
    registered_hop_fake_fns[hop] = fake
