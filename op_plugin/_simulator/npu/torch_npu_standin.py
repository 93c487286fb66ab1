"""The module ``torch_npu`` as a CPU host can honestly offer it: one stand-in for every reader.

Two kinds of the wheel's code name torch_npu while the simulator runs them without it:

* the wheel's Meta functions (``import torch_npu`` at the top of _meta_registrations.py), which
  ``wheel_meta`` compiles with this stand-in as their ``torch_npu``;
* TorchAir's GE converters (``import torch_npu`` / ``from torch_npu.npu.utils import
  _is_gte_cann_version`` inside the converter function), which get it only while TorchAir runs a
  converter (``hosting/converter_torch_npu.py``).

What it offers, and nothing else: torch_npu's dtype constants (``TORCH_NPU_DTYPES``, the wheel's
own values), ``torch_npu.uint8`` (used by the Meta functions only as a default *torch* dtype:
torch.uint8), ``torch_npu.npu.utils.get_cann_version`` / ``_is_gte_cann_version`` answering
``SIMULATED_CANN_VERSION`` and ``torch_npu.npu._backends.get_soc_version`` answering -1 (no Ascend
SoC). Any other name (``torch_npu.npu.NPUGraph``, ``torch_npu.npu_format_cast``, ...) raises
``TorchNpuUnavailable`` naming it: a CPU host has no torch_npu. The stand-in is never put in
``sys.modules``: op_plugin decides "Ascend host" by ``"torch_npu" in sys.modules``.
"""
from __future__ import annotations

import torch

# The CANN release the simulator stands for: the newest one the wheel's compatibility table
# (torch_npu-2.13.0.dist-info/METADATA) names. On an NPU `get_cann_version()` asks the installed
# CANN (torch_npu._C._get_cann_version); here no CANN is installed, so code that branches on the
# version (npu_transpose_batchmatmul's perm_x2 check from 8.5.0, npu_sparse_flash_attention's
# value=None from 9.2.0, npu_mla_prolog_v2/v3's 8.5.0.alpha003 layouts, TorchAir's int4 Bitcast from
# 8.5.0) takes this release's branch.
SIMULATED_CANN_VERSION = "8.5.0"

# name -> value; tensors of these formats are stored as torch.uint8 (int4, hifloat8, fp4 x2) or the
# torch float8 dtype (float8_e5m2/e4m3fn) by torch_npu, which is what the wheel's Meta functions create.
TORCH_NPU_DTYPES = {
    "int4": 285,              # 4-bit integer, two per byte (uint8 storage)
    "hifloat8": 290,          # Ascend's HiFloat8 (uint8 storage)
    "float8_e5m2": 291,       # the NPU's float8_e5m2 (torch.float8_e5m2 storage)
    "float8_e4m3fn": 292,     # the NPU's float8_e4m3fn (torch.float8_e4m3fn storage)
    "float8_e8m0fnu": 293,    # MX block-scale exponent (torch.float8_e8m0fnu / uint8 storage)
    "float4_e2m1fn_x2": 296,  # two fp4 e2m1 per byte (uint8 storage)
    "float4_e1m2fn_x2": 297,  # two fp4 e1m2 per byte (uint8 storage)
}


class TorchNpuUnavailable(NotImplementedError):
    """A torch_npu name the CPU host's stand-in does not offer."""


def get_cann_version(module="CANN") -> str:
    """torch_npu.npu.utils.get_cann_version: on an NPU the installed CANN component's version
    string; here SIMULATED_CANN_VERSION for every component."""
    del module
    return SIMULATED_CANN_VERSION


def _version_key(version: str):
    """"8.5.0" > "8.5.0.alpha003" > "8.3.RC1": numeric parts first, a release above its pre-releases."""
    numbers, rest = [], []
    for part in str(version).split("."):
        (numbers if part.isdigit() and not rest else rest).append(part)
    return tuple(int(n) for n in numbers), 0 if rest else 1, tuple(rest)


def is_gte_cann_version(version, module="CANN") -> bool:
    """torch_npu.npu.utils._is_gte_cann_version: on an NPU compares the installed CANN; here
    SIMULATED_CANN_VERSION."""
    return _version_key(get_cann_version(module)) >= _version_key(version)


def get_soc_version() -> int:
    """torch_npu.npu._backends.get_soc_version: on an NPU the SoC's enum value; here -1, no Ascend SoC."""
    return -1


class TorchNpuDType(int):
    """A torch_npu dtype constant. On an NPU ``torch_npu.<name>`` is ``torch_npu._C._cd.DType.<name>``
    (torch_npu/_init/core/_exports.py), an enum of the NPU-only formats torch has no dtype for,
    whose value is the c10 ScalarType number torch_npu gives it and which ops take as an ``int``
    dtype argument (``x_dtype=torch_npu.hifloat8``). Here: an int with the same value (the values
    are the wheel's own, from TORCH_DTYPE_ENUM_VALUE_TO_SCALAR_TYPE_MAP and TorchAir's
    torch_dtype_value_to_ge_type), so ``x_dtype == torch_npu.hifloat8`` and the dtype maps behave
    as on an NPU; its repr names it."""

    def __new__(cls, name, value):
        self = super().__new__(cls, value)
        self.name = name
        return self

    def __repr__(self):
        return f"torch_npu.{self.name}"

    __str__ = __repr__


_SUBMODULE = object()  # the name is a submodule: a stand-in of its own

# The names each level of the stand-in offers, with their values.
_OFFERED = {
    ("torch_npu",): {**{name: TorchNpuDType(name, value) for name, value in TORCH_NPU_DTYPES.items()},
                     "uint8": torch.uint8, "npu": _SUBMODULE},
    ("torch_npu", "npu"): {"utils": _SUBMODULE, "_backends": _SUBMODULE},
    ("torch_npu", "npu", "utils"): {"get_cann_version": get_cann_version, "_is_gte_cann_version": is_gte_cann_version},
    ("torch_npu", "npu", "_backends"): {"get_soc_version": get_soc_version},
}


class TorchNpuStandIn:
    """``torch_npu`` (or one of its submodules, `path`) with only the names in `_OFFERED`."""

    def __init__(self, path=("torch_npu",)):
        self._path = tuple(path)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _OFFERED.get(self._path, {}).get(name)
        if value is None:
            raise TorchNpuUnavailable(
                f"{'.'.join(self._path + (name,))} needs torch_npu on an NPU host: a CPU host has no torch_npu "
                "(the simulator's stand-in offers only its dtype constants and the CANN version queries)")
        return TorchNpuStandIn(self._path + (name,)) if value is _SUBMODULE else value

    def __repr__(self):
        return f"<CPU-host stand-in for {'.'.join(self._path)}>"


TORCH_NPU = TorchNpuStandIn()


def resolve(dotted: str):
    """The stand-in for an importable name: "torch_npu", "torch_npu.npu", "torch_npu.npu.utils" ...;
    TorchNpuUnavailable (naming it) for any submodule the stand-in does not offer."""
    parts = dotted.split(".")
    if parts[0] != "torch_npu":
        raise ValueError(f"{dotted} is not torch_npu")
    module = TORCH_NPU
    for part in parts[1:]:
        module = getattr(module, part)
        if not isinstance(module, TorchNpuStandIn):
            raise TorchNpuUnavailable(f"{dotted} is not a module of torch_npu's CPU-host stand-in")
    return module
