"""The GE IR as data: op prototypes, dtype numberings, attribute values, graph structure.

Owns the vocabulary shared by the YAML `ge:` mapping, the lowering, the simulator and the tools
(`ir`: input/output kinds, attr value types, `IrPrototype`), the parser of CANN's `REG_OP`
prototype text (`reg_op`), the decoding of GraphDef values (`values`) and the reading of a
GraphDef's structure (`graph`: input references, topological order). It knows nothing of YAML,
torch.library or TorchAir.

May import: `op_plugin._base`, torch.
"""
