"""The console entry's quick exit (``cli.run``): exit codes kept, files dropped in cycles still complete."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from beam_sft import cli

# A child that swaps the real parser for one command whose defaults decide the exit. The command
# leaves a buffered file open and unflushed in a module global (only the interpreter's teardown closes
# it: os._exit would lose it) and garbage with a finalizer in a reference cycle (only the collector
# runs it); an atexit hook records whether the collector was frozen.
CHILD = textwrap.dedent(
    """
    import argparse, atexit, gc, json, sys
    from beam_sft import cli

    out, state, quick, code = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
    OPEN = []

    def command(args):
        class Cycle:
            def __del__(self):
                open(state + ".finalized", "w").close()
        cycle = Cycle()
        cycle.self = cycle
        OPEN.append(open(out, "w", buffering=1 << 20))
        OPEN[0].write("x" * 100_000)  # past the text layer's chunk: waits in the buffer below it
        OPEN.append(open(out + ".small", "w", buffering=1 << 20))
        OPEN[1].write("y" * 100)  # waits in the text layer itself
        return code

    def parser():
        p = argparse.ArgumentParser()
        p.set_defaults(func=command, quick_exit=quick)
        return p

    atexit.register(lambda: open(state, "w").write(json.dumps({"frozen": gc.get_freeze_count()})))
    cli.build_parser = parser
    cli.guard_command = lambda args: None  # the test's command writes outside the output guard
    sys.argv = ["beam-sft"]
    cli.run()
    """
)


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("code", [0, 2])
def test_the_exit_keeps_the_code_closes_open_files_and_finalizes_garbage(tmp_path: Path, quick: bool, code: int):
    out, state = tmp_path / "out.txt", tmp_path / "state.json"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), str(state), "1" if quick else "0", str(code)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert out.read_text() == "x" * 100_000  # flushed, layer by layer, from the top
    assert Path(f"{out}.small").read_text() == "y" * 100
    assert (tmp_path / "state.json.finalized").exists()  # the garbage was collected before the freeze
    frozen = json.loads(state.read_text())["frozen"]
    assert (frozen > 0) == quick  # only an opted-in command skips the last sweep


def test_only_commands_that_close_their_outputs_opt_in():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    quick = {name for name, p in sub.choices.items() if p.get_default("quick_exit")}
    # train, merge, export, eval, reason and plan hold models, pools or servers: they exit the slow way
    assert quick == {"prepare", "merge-shards", "convert", "verify", "inspect", "report", "check-tokenizer"}


def test_the_module_entry_uses_the_quick_exit_and_keeps_an_error_code(tmp_path: Path):
    missing = tmp_path / "missing.jsonl"
    proc = subprocess.run([sys.executable, "-m", "beam_sft", "convert", str(missing), "-o", str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "missing.jsonl" in proc.stderr, proc.stderr


def test_the_console_script_is_the_quick_entry():
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["beam-sft"] == "beam_sft.cli:run"
