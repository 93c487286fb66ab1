"""Emulating torch_npu on a CPU host: its operators defined from the wheel's schemas and Meta
functions with reference kernels (`ops`, `wheel_meta`, `reference`, `attention`), the module
`torch_npu` as a CPU host can offer it (`torch_npu_standin`), its dispatch choices (`dispatch`),
and its NPU generator's seed/offset protocol (`generator`)."""
