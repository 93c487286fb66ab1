"""Inputs for an op built from its YAML `samples:`, for tests, demos, benchmarks and `op-plugin test`
(public as `op_plugin.testing`).

    from op_plugin import testing
    for case in testing.sample_cases("npu::npu_custom_linear"):
        args, kwargs = case.inputs()                  # sizes from `dims:`
        args, kwargs = case.inputs(case.variants()[2])  # the same sample at other sizes

`variants()` gives size assignments for the named `dims:` that differ from each other and from the
sample's fixed sizes, and are never 0 or 1, so torch.compile(dynamic=True) sees genuinely new
shapes without specialising or duck-sizing two dims into one.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ... import _registry
from ..._base.errors import OpPluginError
from ..._registry.library import op_overload
from ..._spec.dtypes import DTYPES, FLOATING
from ..._spec.model import OpSpec, Sample, TensorSample
from ..._spec.parse_samples import sample_size_problem
from ..._spec.schema import ArgKind
from .._shared.tolerances import tolerances

__all__ = ["SampleCase", "assert_results_close", "clone_tree", "sample_cases"]


@dataclass(frozen=True)
class SampleCase:
    spec: OpSpec
    index: int
    sample: Sample

    @property
    def id(self) -> str:
        return f"{self.spec.name}-{self.index}"

    @property
    def op(self) -> torch._ops.OpOverload:
        return op_overload(self.spec)

    def used_dims(self) -> list[str]:
        declared = dict(self.spec.dims)
        found: list[str] = []
        for _, value in self.sample.values:
            for item in _leaves(value):
                names = list(item.shape) + [item.low, item.high] if isinstance(item, TensorSample) else [item]
                for n in names:  # a plain loop: a shape may use one name twice ([B, 2, S, S])
                    if isinstance(n, str) and n in declared and n not in found:
                        found.append(n)
        return found

    def variants(self, count: int = 3) -> list[dict[str, int]]:
        """`count` size assignments; the first is the YAML's own `dims:`."""
        used = self.used_dims()
        fixed = {d for _, v in self.sample.values for t in _leaves(v) if isinstance(t, TensorSample)
                 for d in t.shape if isinstance(d, int)}
        base = dict(self.spec.dims)
        result = []
        for k in range(count):
            taken = set(fixed) | {0, 1}
            assignment = {}
            for name in used:
                value = base[name] + k
                while value in taken:
                    value += 1
                taken.add(value)
                assignment[name] = value
            result.append(assignment)
        return result

    def inputs(self, dims: Mapping[str, int] | None = None, *, requires_grad: bool = False,
               seed: int = 0) -> tuple[tuple, dict]:
        """Fresh tensors for this sample; floating tensors require grad when asked."""
        sizes = dict(self.spec.dims)
        sizes.update(dims or {})
        too_big = sample_size_problem(self.sample.values, sizes)
        if too_big is not None:  # before anything is allocated
            suffix, message = too_big
            where = self.sample.location
            raise OpPluginError(f"{where.with_field((where.field or f'samples[{self.index}]') + suffix)}: {message}")
        generator = torch.Generator().manual_seed(seed)
        given = dict(self.sample.values)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        positional = True
        for arg in self.spec.schema.args:
            if arg.name not in given:
                positional = False  # later arguments go by name so defaults in between stay defaults
                continue
            if arg.kind is ArgKind.SCALAR_TYPE:
                value = DTYPES[given[arg.name]]  # ScalarType samples are dtype names
            else:
                value = _materialise(given[arg.name], sizes, generator, requires_grad)
            if positional and not arg.kwarg_only:
                args.append(value)
            else:
                kwargs[arg.name] = value
        return tuple(args), kwargs


def clone_tree(tree: Any) -> Any:
    """Detached copies of every tensor in a nest of lists/tuples/dicts (inputs for a second run)."""
    return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), tree)


def assert_results_close(actual: Any, expected: Any, label: str = "output") -> None:
    """Same structure, dtypes and shapes, and values within `tolerances(dtype)`; non-tensors equal."""
    actual_leaves = torch.utils._pytree.tree_leaves(actual)
    expected_leaves = torch.utils._pytree.tree_leaves(expected)
    assert len(actual_leaves) == len(expected_leaves), \
        f"{len(actual_leaves)} result(s) where {len(expected_leaves)} are expected"
    several = len(expected_leaves) > 1
    for index, (got, want) in enumerate(zip(actual_leaves, expected_leaves, strict=True)):
        which = f"{label} {index}: " if several else ""   # which output of a multi-output op differs
        if isinstance(want, torch.Tensor):
            assert isinstance(got, torch.Tensor), f"{which}got {type(got).__name__}, expected a tensor"
            assert got.dtype == want.dtype and got.shape == want.shape, \
                f"{which}got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
            torch.testing.assert_close(got, want, **tolerances(want.dtype),
                                       msg=lambda m, which=which: f"{which}{m}")
        else:
            assert got == want, f"{which}got {got!r}, expected {want!r}"


def sample_cases(name: str | None = None) -> list[SampleCase]:
    """Sample cases of one loaded op, or of every loaded op when `name` is None."""
    if name is not None:
        st = _registry.find(name)
        if st is None or st.spec is None:
            raise OpPluginError(f"{_registry.qualify(name)} is not loaded")
        states = [st]
    else:
        states = _registry.loaded()
    return [SampleCase(st.spec, i, s) for st in states for i, s in enumerate(st.spec.samples)]


def _leaves(value: Any) -> list:
    return list(value) if isinstance(value, tuple) else [value]


def _resolve(value: int | str, sizes: Mapping[str, int]) -> int:
    return sizes[value] if isinstance(value, str) else value


def _materialise(value: Any, sizes: Mapping[str, int], generator: torch.Generator, requires_grad: bool) -> Any:
    if isinstance(value, TensorSample):
        return _tensor(value, sizes, generator, requires_grad)
    if isinstance(value, tuple):
        if value and isinstance(value[0], TensorSample):
            return [_tensor(v, sizes, generator, requires_grad) for v in value]
        return [_resolve(v, sizes) if isinstance(v, str) and v in sizes else v for v in value]
    if isinstance(value, str) and value in sizes:
        return sizes[value]
    return value


def _tensor(spec: TensorSample, sizes: Mapping[str, int], generator: torch.Generator,
            requires_grad: bool) -> torch.Tensor:
    shape = [_resolve(d, sizes) for d in spec.shape]
    if spec.dtype in FLOATING:
        tensor = torch.randn(shape, generator=generator).to(spec.dtype)
        return tensor.requires_grad_(requires_grad)
    if spec.dtype is torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    low = _resolve(spec.low, sizes) if spec.low is not None else -8
    high = _resolve(spec.high, sizes) if spec.high is not None else 8
    if spec.unique:
        count = 1
        for d in shape:
            count *= d
        if count > high - low:
            raise OpPluginError(f"cannot draw {count} unique values from [{low}, {high})")
        return _unique_ints(count, low, high, generator).reshape(shape).to(spec.dtype)
    return torch.randint(low, high, shape, generator=generator).to(spec.dtype)


def _unique_ints(count: int, low: int, high: int, generator: torch.Generator) -> torch.Tensor:
    """`count` distinct ints from [low, high) in random order, in memory proportional to `count`:
    a permutation of a small range, else draws until enough distinct values (the range is over four
    times `count`, so each draw is new with probability above 3/4)."""
    span = high - low
    if span <= 4 * count:
        return torch.randperm(span, generator=generator)[:count] + low
    chosen: dict[int, None] = {}
    while len(chosen) < count:
        for value in torch.randint(low, high, (2 * (count - len(chosen)),), generator=generator).tolist():
            chosen.setdefault(value, None)
            if len(chosen) == count:
                break
    return torch.tensor(list(chosen), dtype=torch.int64)
