from __future__ import annotations

import subprocess
import sys

import pytest

from beam_sft import cli


def test_every_documented_subcommand_is_registered():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("convert", "prepare", "verify", "inspect", "train", "merge", "eval", "fixture", "check-tokenizer"):
        assert name in sub.choices, name


def test_help_is_fast_and_does_not_import_torch():
    code = "import sys; from beam_sft import cli; cli.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "beam_sft", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("beam-sft ")


def test_unknown_subcommand_fails():
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2


def test_ctrl_c_while_the_commands_import_is_one_line_and_130():
    """build_parser imports every command (about a second): Ctrl-C then gave a traceback and -2."""
    code = ("import beam_sft.cli as c\n"
            "def parser():\n    raise KeyboardInterrupt\n"
            "c.build_parser = parser\nc.run()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130
    assert done.stderr.strip() == "beam-sft: interrupted (SIGINT) while starting; nothing was written"


def test_every_error_pickles_to_itself():
    """A Ray task's or a worker's error reaches the driver as itself: ConfigError, OutputRefused,
    PreparedError, ... took other arguments than their message, so unpickling failed (Ray said
    "Failed to deserialize exception") and the shard's own error was lost."""
    import pickle
    from pathlib import Path

    from beam_sft import errors

    cases = [errors.ConfigError("a.b", "bad", file="f.yaml"), errors.TokenizerError(["p1", "p2"]),
             errors.Rejection("invalid_json", "x", {"r": 1}, source="s", row=2),
             errors.OutputRefused(Path("x"), "m", hint=False), errors.PreparedError(Path("p"), "msg"),
             errors.OutputUnwritable("t", "r"), errors.Interrupted(2), errors.VerificationError("v")]
    from beam_sft.evaluate.served import ServedRunStopped

    cases.append(ServedRunStopped("turn 3: HTTP 500", []))
    for error in cases:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error)


def test_a_failed_command_does_not_wait_for_a_thread_blocked_in_a_request():
    """reason's worker threads can stay blocked in recv() after the run ended with a refusal (or an
    interrupt that became one): closing a socket does not end a recv() in another thread, and the
    interpreter's exit joined them for the whole request timeout."""
    code = ("import threading, time, beam_sft.cli as c\n"
            "def dispatch(args):\n"
            "    threading.Thread(target=time.sleep, args=(60,)).start()\n"
            "    return 2\n"
            "c.dispatch = dispatch\n"
            "import sys; sys.argv = ['beam-sft', 'fixture', '--out', 'unused']\n"
            "c.run()\n")
    began = __import__("time").monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and __import__("time").monotonic() - began < 30


def test_an_error_quoting_a_hostile_name_is_shown_not_acted_on(tmp_path, capsys):
    """Every error line goes through dispatch: a file name (or a row's text) it quotes cannot clear the
    terminal, retitle it or reverse the line."""
    name = tmp_path / "no\x1b[2Jsuch\x1b]0;pwned\x07\u202e\u200b.jsonl"
    assert cli.main(["convert", str(name), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert not any(c in err for c in "\x1b\x07\u202e\u200b") and err.count("\n") == 1
    assert "no\\x1b[2Jsuch\\x1b]0;pwned\\x07\\u202e\\u200b.jsonl" in err
