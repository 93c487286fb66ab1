"""`op-plugin declared-cases`: TorchAir's declared converter cases as a suite. The cases, their inputs
and one case's run (`cases`), its outcome (`result`), outputs compared with TorchAir's tolerance
(`compare`), ops that take a communicator run in a gloo world (`group`), guarded worker processes
(`pool`), the summary, page and known-failures file (`report`); the command (`command`)."""
