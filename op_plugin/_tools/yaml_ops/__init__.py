"""`op-plugin validate` and `op-plugin list`: YAML op definitions checked without registering them,
and the ops registered now (`command`)."""
