"""The op-plugin command line: validate, list, demo, and the backend options as flags."""
import os
import re
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


def _torch_npu_named(tmp_path, name="npu_scaled_masked_softmax"):
    path = tmp_path / "clash.yaml"
    path.write_text(f"ops:\n  - func: {name}(Tensor x) -> Tensor\n    outputs: [{{size: x.shape, dtype: x}}]\n")
    return path


def test_validate_refuses_a_torch_npu_name_as_load_yaml_does(tmp_path, capsys):
    """Issue 37, item 1: `op-plugin validate` runs load_yaml's checks (one function, `load_problems`): an
    op named like one of torch_npu's own is refused by both, with the same located message."""
    import op_plugin

    path = _torch_npu_named(tmp_path)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    with pytest.raises(op_plugin.YamlSpecError) as refused:
        op_plugin.load_yaml(path)
    assert err.strip() == f"error: {refused.value}"
    assert f"{path}:2: op 'npu_scaled_masked_softmax': field 'func'" in err and "torch_npu's own operators" in err


def test_validate_reads_torch_npu_names_from_the_wheel_not_the_process(tmp_path, capsys, monkeypatch):
    """The clash is decided from the pinned wheel's operator list: the same answer in a process where
    torch_npu's ops are not defined (here: the dispatcher made to know none), and for a new overload
    of one of them."""
    from op_plugin._registry import load

    monkeypatch.setattr(load, "exists_in_dispatcher", lambda spec: False)
    assert main(["validate", str(_torch_npu_named(tmp_path))]) == 1
    assert "torch_npu's own operators" in capsys.readouterr().err
    overload = _torch_npu_named(tmp_path, "npu_rms_norm.mine")
    assert main(["validate", str(overload)]) == 1
    assert "may add overloads only to ops it defines itself" in capsys.readouterr().err


def test_the_torch_npu_operator_list_is_the_one_the_simulator_defines():
    """`_spec.names` reads the wheel's operator list below the simulator's layer; it names exactly the
    ops `_simulator.npu.wheel_meta` reads from the same file to define them on a CPU host."""
    from op_plugin._base.wheel import simulator_dir
    from op_plugin._simulator.npu import wheel_meta
    from op_plugin._spec.names import torch_npu_op_names

    names = torch_npu_op_names()
    assert names is not None and "npu_rms_norm" in names and "npu_grouped_matmul.List" in names
    assert names == set(wheel_meta.all_schema_entries(simulator_dir() / "torch_npu"))


def test_validate_checks_files_as_successive_loads(tmp_path, capsys):
    """A later file is checked as load_yaml would check it after the earlier ones: a name defined twice
    is refused naming the first place; the same file given twice is no second definition."""
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    text = "ops:\n  - func: npu_cli_twice(Tensor x) -> Tensor\n    outputs: [{size: x.shape, dtype: x}]\n"
    first.write_text(text)
    second.write_text(text)
    assert main(["validate", str(first), str(first)]) == 0
    capsys.readouterr()
    assert main(["validate", str(first), str(second)]) == 1
    assert f"npu::npu_cli_twice is already loaded from {first}:2" in capsys.readouterr().err


def _cli(*args, env=None, cwd=None):
    env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "op_plugin.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def test_help_version_and_usage_errors_never_import_torch():
    """Issue 37, item 8: `op-plugin --help`, `--version`, no command or a misspelt one are answered before
    op_plugin imports torch (op_plugin._cli_entry)."""
    for args, code in ((["--help"], 0), (["--version"], 0), ([], 2), (["valdate", "x.yaml"], 2)):
        result = _cli(*args)
        assert result.returncode == code, (args, result.stderr[-2000:])
        imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "import time:" in line}
        assert "torch" not in imported, args
    assert "validate" in _cli("--help").stdout
    assert _cli("--version").stdout.startswith("op-plugin ")


def test_a_command_prints_its_first_line_before_torch_loads(tmp_path):
    """`op-plugin COMMAND` says what it is doing before the slow imports, when progress is shown (a terminal,
    OP_PLUGIN_PROGRESS=1), and nothing of it with OP_PLUGIN_PROGRESS=0."""
    good = ROOT / "yaml" / "norm_ops.yaml"
    result = _cli("validate", str(good), env={"OP_PLUGIN_PROGRESS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if "import time:" not in line)
    assert lines[first] == "op-plugin validate: loading torch and op_plugin ..."
    torch_at = next(i for i, line in enumerate(lines) if re.search(r"\|\s+torch(\.|$)", line.rstrip()))
    assert first < torch_at   # -X importtime lists a module as its import ends: torch's first submodule
    assert "RuntimeWarning" not in result.stderr   # runpy's, had the CLI module been imported before it runs
    quiet = _cli("validate", str(good), env={"OP_PLUGIN_PROGRESS": "0"})
    assert "loading torch" not in quiet.stderr and quiet.stdout.startswith("ok: ")
    script = subprocess.run([str(Path(sys.executable).parent / "op-plugin"), "validate", str(good)], text=True,
                            capture_output=True, timeout=300, env=dict(os.environ, OP_PLUGIN_PROGRESS="1"))
    assert script.stderr.splitlines()[0] == "op-plugin validate: loading torch and op_plugin ...", script.stderr


def test_op_plugin_testing_after_a_plain_import():
    """Issue 37, item 2: `import op_plugin` then `op_plugin.testing.oracle`, as the README writes it; the
    module is imported on first use, not by `import op_plugin`."""
    code = ("import sys, op_plugin; before = 'op_plugin.testing' in sys.modules; "
            "print(before, callable(op_plugin.testing.oracle), 'testing' in dir(op_plugin))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.split() == ["False", "True", "True"], result.stderr[-2000:]
