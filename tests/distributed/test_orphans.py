"""The tier's rank processes end with the process that started them, however it ends: here it is killed with
SIGKILL (no cleanup of its own can run, as when a CI limit or `timeout -s KILL` ends pytest), and its ranks
are gone within seconds (the kernel's parent-death signal, `op_plugin._base.processes.die_with_parent`)."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent("""
    import importlib.util, time
    if __name__ == "__main__":  # the ranks are spawned: they import this file again
        spec = importlib.util.spec_from_file_location("_tier_conftest", {conftest!r})
        tier = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tier)
        group = tier.RankGroup(2)
        print("ranks", *[p.pid for p in group.processes], flush=True)
        time.sleep(600)
""")


def _gone(pid: int) -> bool:
    """The process has ended (no such process, or a zombie waiting for its new parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            text = handle.read()
    except OSError:
        return True
    return text[text.rfind(")") + 2:].split()[0] in ("Z", "X")


def test_ranks_end_when_the_process_that_started_them_is_killed(tmp_path):
    script = tmp_path / "start_ranks.py"
    script.write_text(SCRIPT.format(conftest=str(HERE / "conftest.py")))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True, cwd=tmp_path)
    ranks = []
    try:
        line = parent.stdout.readline()  # blocks until the ranks are up (or the script ends)
        assert line.startswith("ranks "), (line, parent.poll())
        ranks = [int(pid) for pid in line.split()[1:]]
        assert len(ranks) == 2 and not any(_gone(pid) for pid in ranks)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(_gone(pid) for pid in ranks):
            time.sleep(0.2)
        assert all(_gone(pid) for pid in ranks), [pid for pid in ranks if not _gone(pid)]
    finally:
        for pid in [parent.pid, *ranks]:  # whatever the outcome, nothing of this test is left running
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        parent.wait(timeout=30)
