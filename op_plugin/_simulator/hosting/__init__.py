"""Hosting TorchAir on a CPU host: the pinned wheel unpacked aside (`install`), TorchAir imported with
its side effects contained (`loader`, `torchair_patches`, `torchair_fixes`), the stand-in for its one
native module (`native_stub`), the IR prototypes it is answered (`ir_registry`), the FX shapes the
lowering records (`fx_meta`), data dumps (`data_dump`), and the YAML ops' custom GE types
(`custom_ops`). The only part of the simulator that imports TorchAir."""
