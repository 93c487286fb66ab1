"""5. Eager dispatch overhead: a YAML op vs a plain torch.library.custom_op vs the reference function.

All three do the same work, the shipped reference kernel of npu_vector_add (shape check, then
x1 + x2) on two 8-element float32 tensors (no grad):

* YAML op: `torch.ops.npu.npu_vector_add(x, y)` (op_plugin's generated registrations);
* plain op: a `torch.library.custom_op` whose body calls the same reference function, with a fake
  function and the same autograd formula registered (as op_plugin registers), called the same way
  through the dispatcher, `torch.ops.opbench.vector_add(x, y)`; also called as the CustomOpDef
  object (its Python `__call__`) for reference;
* the reference function called directly, and `torch.add` as the floor.

timeit, `number` calls per measurement, the candidates interleaved in each of `repeat` rounds;
the figure is the median per-call time in microseconds.
"""
from __future__ import annotations

if __name__ == "__main__" and not __package__:  # `python bench/dispatch.py`
    import pathlib, sys  # noqa: E401
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from bench._common import script_shim
    script_shim(__file__, "dispatch")
    raise SystemExit

import timeit

from ._common import cli, goal, median, top_profile

FULL = {"number": 4000, "repeat": 15, "numel": 8}
QUICK = {"number": 50, "repeat": 2, "numel": 8}
GOAL = 2.0


def candidates(numel: int) -> dict:
    import torch

    import op_plugin  # noqa: F401
    from op_plugin import _registry

    reference = _registry.state("npu::npu_vector_add").reference

    # explicit schema: this module uses `from __future__ import annotations`, which custom_op cannot infer from
    @torch.library.custom_op("opbench::vector_add", mutates_args=(), schema="(Tensor x1, Tensor x2) -> Tensor")
    def plain(x1, x2):
        return reference(x1, x2)

    @plain.register_fake
    def _(x1, x2):
        return torch.empty_like(x1)

    def backward(ctx, grad):
        return grad, grad

    plain.register_autograd(backward)
    x, y = torch.randn(numel), torch.randn(numel)
    yaml_op = torch.ops.npu.npu_vector_add
    plain_op = torch.ops.opbench.vector_add
    return {
        "yaml_op": lambda: yaml_op(x, y),
        "plain_custom_op": lambda: plain_op(x, y),
        "plain_custom_op_def_call": lambda: plain(x, y),
        "reference_direct": lambda: reference(x, y),
        "torch_add": lambda: torch.add(x, y),
    }


LABELS = {
    "yaml_op": "YAML op (torch.ops.npu.npu_vector_add)",
    "plain_custom_op": "plain torch.library.custom_op (torch.ops.opbench.vector_add)",
    "plain_custom_op_def_call": "plain custom_op, CustomOpDef __call__",
    "reference_direct": "reference function called directly",
    "torch_add": "torch.add (floor)",
}


def run(quick: bool = False) -> dict:
    import torch

    cfg = QUICK if quick else FULL
    fns = candidates(cfg["numel"])
    with torch.no_grad():
        for fn in fns.values():
            for _ in range(200):
                fn()
        samples = {name: [] for name in fns}
        for _ in range(cfg["repeat"]):
            for name, fn in fns.items():
                samples[name].append(timeit.timeit(fn, number=cfg["number"]) / cfg["number"] * 1e6)
    us = {name: median(values) for name, values in samples.items()}
    base = us["plain_custom_op"]
    figures = {f"{name}_us": value for name, value in us.items()}
    figures["ratio_yaml_vs_plain"] = us["yaml_op"] / base
    figures["ratio_yaml_vs_reference"] = us["yaml_op"] / us["reference_direct"]
    figures["yaml_overhead_us"] = us["yaml_op"] - us["reference_direct"]
    figures["plain_overhead_us"] = base - us["reference_direct"]
    rows = [[LABELS[name], value, value / base, value - us["reference_direct"]] for name, value in us.items()]
    result = {
        "name": "dispatch",
        "title": "Eager dispatch: YAML op vs plain torch.library.custom_op vs the reference function",
        "config": {"tensor": f"float32[{cfg['numel']}] x 2, no grad", "calls per measurement": cfg["number"],
                   "measurements per candidate (interleaved)": cfg["repeat"]},
        "figures": figures,
        "tables": [{"title": "Median microseconds per call; ratio vs the plain custom_op called through torch.ops",
                    "columns": ["call", "us/call", "ratio vs plain op", "us over the reference function"],
                    "rows": rows}],
        "goals": [goal("YAML op dispatch <= 2x a plain torch.library op", figures["ratio_yaml_vs_plain"], GOAL, "x",
                       f"YAML {us['yaml_op']:.1f} us vs plain {base:.1f} us "
                       f"vs reference {us['reference_direct']:.1f} us")],
        "notes": ["Both ops are called through the dispatcher (torch.ops...); both have a fake function and an "
                  "autograd formula, so the difference is op_plugin's own Python around the kernel."],
    }
    if figures["ratio_yaml_vs_plain"] > GOAL and not quick:
        import cProfile

        profile = cProfile.Profile()
        with torch.no_grad():
            profile.enable()
            for _ in range(20000):
                fns["yaml_op"]()
            profile.disable()
        result["profile"] = ("cProfile of 20,000 YAML op calls\n\n-- by own time --\n"
                             + top_profile(profile, 20, "tottime"))
    return result


def main() -> None:
    cli("dispatch", __doc__.splitlines()[0], run)


if __name__ == "__main__":
    main()
