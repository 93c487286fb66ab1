"""The op-plugin command line: validate, list, demo, and the backend options as flags."""
import subprocess
import sys
from pathlib import Path

import pytest

from op_plugin._tools._shared.command import backend_options as _backend_options
from op_plugin.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def test_validate_accepts_shipped_yaml(capsys):
    files = sorted(str(p) for p in (ROOT / "yaml").glob("*.yaml"))
    assert main(["validate", *files]) == 0
    out = capsys.readouterr().out
    assert "npu::npu_custom_linear" in out and out.count("ok: ") == len(files)


def test_validate_reports_file_line_op_field(capsys):
    broken = ROOT / "tests" / "broken_yaml" / "size_unknown_name.yaml"
    good = ROOT / "yaml" / "norm_ops.yaml"
    assert main(["validate", str(good), str(broken)]) == 1
    captured = capsys.readouterr()
    assert f"error: {broken}:" in captured.err and "op 'npu_broken_size_unknown_name_b'" in captured.err
    assert "field 'outputs[0].size'" in captured.err
    assert f"ok: {good}" in captured.out


def test_list_shows_every_loaded_op(capsys, tmp_path):
    user = tmp_path / "user.yaml"
    user.write_text("ops:\n  - func: npu_cli_listed(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n")
    try:
        assert main(["list", "--yaml", str(user)]) == 0
    finally:
        from op_plugin._registry.load import unload
        unload("npu_cli_listed")
    out = capsys.readouterr().out
    assert "npu_custom_kv_cache_update_(Tensor(a!) cache" in out
    assert "npu_cli_listed(Tensor x) -> Tensor" in out and f"{user}:2" in out


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "op-plugin"
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "validate" in result.stdout


def test_backend_flags_come_from_the_config_fields():
    """compare and inspect take one flag per NpuGraphConfig field (compare all but mode: it checks the
    GE graph), and hand over only the options given."""
    from op_plugin._backend import option_specs

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for command, skipped in (("inspect", set()), ("compare", {"mode"})):
        flags = {opt for action in commands[command]._actions for opt in action.option_strings}
        expected = {"--" + s.name.replace("_", "-") for s in option_specs() if s.name not in skipped}
        assert expected <= flags, (command, expected - flags)
        assert not {"--" + name.replace("_", "-") for name in skipped} & flags
    args = parser.parse_args(["compare", "m:f", "--soc", "Ascend950", "--torchair-gelu", "--dump", "txt"])
    assert _backend_options(args) == {"soc": "Ascend950", "torchair_gelu": True, "dump": "txt"}
    args = parser.parse_args(["inspect", "m:f", "--mode", "aclgraph", "--torchair-view-optimize"])
    assert _backend_options(args) == {"mode": "aclgraph", "torchair_view_optimize": True}
    assert _backend_options(parser.parse_args(["compare", "m:f"])) == {}


def test_declared_cases_from_json_errors_are_error_lines(tmp_path, capsys):
    """A missing, non-JSON or foreign --from-json file is one `error:` line and exit 2, not a traceback."""
    missing = tmp_path / "missing.json"
    assert main(["declared-cases", "--from-json", str(missing)]) == 2
    assert f"error: cannot read {missing}: No such file or directory" in capsys.readouterr().err
    for name, text in (("garbage.json", "not json {"), ("foreign.json", '{"summary": {}}'),
                       ("wrong.json", '{"cases": [{"nonsense": 1}]}'), ("list.json", "[1, 2]")):
        path = tmp_path / name
        path.write_text(text)
        assert main(["declared-cases", "--from-json", str(path)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path} is not the JSON a `declared-cases --json` run writes"), err


def test_declared_cases_output_files_that_cannot_be_written_are_error_lines(tmp_path, capsys):
    saved = tmp_path / "saved.json"
    saved.write_text('{"summary": {}, "cases": []}')
    for option in ("--json", "--markdown", "--write-known"):
        target = tmp_path / "missing-folder" / "out"
        assert main(["declared-cases", "--from-json", str(saved), option, str(target)]) == 2, option
        assert f"error: cannot write {target}: No such file or directory" in capsys.readouterr().err


def test_the_command_table_is_the_parser():
    """Every subcommand comes from one entry of `op_plugin.cli.COMMANDS` (its name, help, arguments and
    work), in the table's order, and each command's own `--help` renders and exits 0."""
    import ast
    import inspect as pyinspect

    from op_plugin._tools._shared.command import Command
    from op_plugin.cli import COMMANDS

    names = [c.name for c in COMMANDS]
    assert names == ["validate", "list", "demo", "inspect", "msopgen", "opproto", "declared-cases", "test",
                     "compare", "setup-simulator", "run"]
    parser = build_parser()
    choices = parser._subparsers._group_actions[0].choices
    assert list(choices) == names
    for command in COMMANDS:
        assert isinstance(command, Command) and command.help and type(command).run is not Command.run
        sub = choices[command.name]
        assert sub.get_default("run") == command.run
        help_text = sub.format_help()
        assert help_text.startswith(f"usage: op-plugin {command.name} ")
        if command.description:
            assert " ".join(command.description.split()[:4]) in " ".join(help_text.split())
        assert len(sub._actions) > 1 or command.name == "demo", command  # its own arguments, beside -h
        with pytest.raises(SystemExit) as exit_info:
            main([command.name, "--help"])
        assert exit_info.value.code == 0, command.name
        # A command imports only the standard library at its top (the work is imported inside run),
        # and never the CLI that lists it.
        module = sys.modules[type(command).__module__]
        tree = ast.parse(pyinspect.getsource(module))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in top:
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module.startswith(("_shared.command", "command")) or node.module == "__future__", \
                    (module.__name__, node.module)
            else:
                name = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, (module.__name__, name)


def test_setup_simulator_unpacks_into_the_folder_it_is_given(tmp_path, monkeypatch):
    """`op-plugin setup-simulator [TARGET]` is the install command the simulator's errors name."""
    from op_plugin._simulator.hosting import install
    from op_plugin.cli import main

    seen = []
    monkeypatch.setattr(install, "install_simulator", lambda target: seen.append(target) or tmp_path)
    assert main(["setup-simulator", str(tmp_path)]) == 0
    assert seen == [str(tmp_path)]
    assert "op-plugin setup-simulator" in install.INSTALL_HINT
