"""`op-plugin msopgen` and `op-plugin opproto`: what an Ascend C op project needs for the custom GE
ops of YAML files. msOpGen JSON (`msopgen`), GE op prototypes (REG_OP) with infer functions
(`opproto`, its size rules translated to C++ by `opproto_infer`), YAML values as C++ text
(`cpp_text`), `--out` files written without following links (`out_files`); the commands (`command`)."""
