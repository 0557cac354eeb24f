from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


FORGED = "a\nbeam-sft convert: done, 3 rows kept\n.jsonl"  # a newline in a file's name: a line that reads as ours


@pytest.mark.parametrize("name", [FORGED, "b\x1b[2J\x1b]0;t\x07.jsonl"])
def test_an_error_naming_a_file_with_a_newline_or_esc_in_its_name_is_one_line(tmp_path, capsys, name):
    """One error is one line: the file's name, quoted by the error (convert's "both read", from
    sources.read_twice), is shown with its newline as \\n and its ESC as \\x1b."""
    path = tmp_path / name
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n', encoding="utf-8")
    assert cli.main(["convert", str(path), str(path), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("beam-sft convert: error: ") and "\x1b" not in err, err
    assert "a\\nbeam-sft convert: done, 3 rows kept\\n.jsonl" in err or "b\\x1b[2J\\x1b]0;t\\x07.jsonl" in err


def test_a_folder_with_a_newline_in_its_name_is_one_error_line_in_prepare(tmp_path, fixture_dir):
    from tests.tree import assert_one_line_error, run_cli

    folder = tmp_path / "d\nbeam-sft prepare: error: forged"
    folder.mkdir()
    (folder / "notes.txt").write_text("not data", encoding="utf-8")
    code, err = run_cli(["prepare", "--data", str(folder), "--tokenizer", str(fixture_dir),
                         "--output", str(tmp_path / "out"), "--num-proc", "1", "--quiet"])
    assert code == 2
    assert_one_line_error(err, "prepare", "d\\nbeam-sft prepare: error: forged", "no data files")
    assert err.count("\n") == 1, err


def test_a_pre_flight_list_keeps_its_lines_and_each_item_is_one_line(capsys):
    """The pre-flight's list of problems is several lines by design; a name in one item cannot add one."""
    import argparse

    from beam_sft.errors import PreflightError
    from beam_sft.paths import DECLARATION, Declaration
    from beam_sft.train.preflight import raise_if

    with pytest.raises(PreflightError) as caught:
        raise_if([f"[process 0] {FORGED}: empty", "[process 1] b\x1b[2J.jsonl: empty"], "the data")
    assert str(caught.value).splitlines() == [
        "pre-flight failed (the data):",
        "  - [process 0] a\\nbeam-sft convert: done, 3 rows kept\\n.jsonl: empty",
        "  - [process 1] b\\x1b[2J.jsonl: empty"]

    def fail(args):
        raise caught.value

    args = argparse.Namespace(command="train", func=fail, **{DECLARATION: Declaration("nothing")})
    assert cli.dispatch(args) == 2
    assert capsys.readouterr().err.splitlines() == ["beam-sft train: error: " + str(caught.value).splitlines()[0],
                                                    *str(caught.value).splitlines()[1:]]


def test_prepare_says_where_it_wrote_on_one_line_whatever_the_folders_name(tmp_path, fixture_dir, capsys):
    """The success lines name the user's own path too ("prepared dataset: OUT", "wrote ...", "saved to"):
    a newline in it was printed as is, a line that reads as ours."""
    import beam_sft

    out = tmp_path / "o\nprepared dataset: /elsewhere"
    data = Path(beam_sft.__file__).parent / "data" / "samples" / "chat_openai.jsonl"
    assert cli.main(["prepare", "--data", str(data), "--tokenizer", str(fixture_dir), "--output", str(out),
                     "--num-proc", "1", "--quiet", "--no-verify"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("prepared dataset:")]
    assert lines == [f"prepared dataset: {tmp_path}/o\\nprepared dataset: /elsewhere"]
