"""Helpers several `op-plugin` commands share: the `Command` base and command-line plumbing
(`command`), progress bars (`progress`), the project's tolerance rule (`tolerances`) and the
`--version` lines (`version_info`)."""
