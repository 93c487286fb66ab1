"""op_plugin benchmarks: `make bench` or `python -m bench.run_all` writes docs/benchmarks.md.

Each module (compile_time, lowering_scaling, steady_state, recompiles, dispatch, registration)
also runs alone, e.g. `python -m bench.dispatch` (add --quick for a tiny configuration).
"""
