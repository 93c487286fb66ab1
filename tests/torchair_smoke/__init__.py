"""TorchAir's own smoke tests as a tier (run.py, expected.toml; `make torchair-smoke`) and the tests of its runner."""
