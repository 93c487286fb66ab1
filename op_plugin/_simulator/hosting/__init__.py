"""Hosting TorchAir on a CPU host: the pinned wheel unpacked aside (`install`), TorchAir imported with
its side effects contained (`loader`, `torchair_patches`, `torchair_fixes`), `import torch_npu` in its
converters answered by the CPU-host stand-in (`converter_torch_npu`), a `torch_npu` or `torchair` folder of
the user's never imported in their place (`foreign_modules`), the stand-in for its one
native module (`native_stub`), the IR prototypes it is answered (`ir_registry`), the FX shapes the
lowering records (`fx_meta`), data dumps (`data_dump`), and the YAML ops' custom GE types
(`custom_ops`). The only part of the simulator that imports TorchAir."""
