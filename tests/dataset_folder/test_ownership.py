"""Prepare removes or replaces only what a run of ours made, recognised by the
``.beam-sft-owner`` marker (``beam_sft.dataset_folder.owner``), never by a folder's name or a report's key."""

from __future__ import annotations

import json
import os

import pytest

from beam_sft.cli import main
from beam_sft.dataset_folder import owner
from beam_sft.dataset_folder.lock import lock_path
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.prepare.pipeline import failed_dir
from tests.encode.conftest import simple_row, write_jsonl
from tests.tree import assert_one_line_error, tree_digest


def _data(tmp_path):
    return write_jsonl(tmp_path / "rows.jsonl", [simple_row(i) for i in range(3)])


def _prepare(tmp_path, tokenizer_dir, *extra, out="out"):
    return main(["prepare", "--data", str(tmp_path / "rows.jsonl"), "--tokenizer", str(tokenizer_dir),
                 "--output", str(tmp_path / out), "--num-proc", "1", "--quiet", *extra])


def test_a_published_folder_carries_the_marker_of_its_run(tmp_path, tokenizer_dir):
    _data(tmp_path)
    assert _prepare(tmp_path, tokenizer_dir) == 0
    marker = owner.read_marker(tmp_path / "out")
    assert marker is not None and marker["pid"] == os.getpid() and marker["started"] == owner.process_start(os.getpid())
    assert owner.MARKER not in json.loads((tmp_path / "out" / "report.json").read_text())["files"]["files"]


def test_a_users_file_deep_inside_our_folder_keeps_it_from_being_replaced(tmp_path, tokenizer_dir, capsys):
    _data(tmp_path)
    assert _prepare(tmp_path, tokenizer_dir) == 0
    mine = tmp_path / "out" / "tokenizer" / "my_notes.txt"
    mine.write_text("keep me")
    (tmp_path / "out" / ".hidden").write_text("me too")
    before = tree_digest(tmp_path / "out")
    capsys.readouterr()
    assert _prepare(tmp_path, tokenizer_dir, "--no-cache") == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", str(mine))
    assert tree_digest(tmp_path / "out") == before


# "OWN_PID" stands for this process's pid, filled in at run time: a test id naming the pid would
# differ between pytest-xdist's workers, which must collect the same tests.
@pytest.mark.parametrize("name", [".out.old-999999", ".out.staging-999998", ".out.staging-OWN_PID",
                                  ".out.failed-verification"])
def test_user_folders_named_like_our_leftovers_stay(tmp_path, tokenizer_dir, name):
    name = name.replace("OWN_PID", str(os.getpid()))
    _data(tmp_path)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "thesis.tex").write_text("years of work")
    before = tree_digest(folder)
    code = _prepare(tmp_path, tokenizer_dir)
    # our own pid's staging name in the way: refused (one line); the others are simply left alone
    assert code == (2 if name.endswith(str(os.getpid())) else 0)
    assert tree_digest(folder) == before


def test_a_failed_verification_never_replaces_a_users_folder_of_that_name(tmp_path, fixture_dir, monkeypatch):
    from beam_sft.errors import VerificationError
    from tests.prepare.test_verify_then_publish import _plant_bug

    config = PrepareConfig(sources=[SourceSpec(path=str(_data(tmp_path)))], tokenizer=str(fixture_dir),
                           output=str(tmp_path / "out"), num_proc=1, encoder="template")
    failed = failed_dir(tmp_path / "out")
    failed.mkdir()
    (failed / "mine.txt").write_text("x")
    _plant_bug(monkeypatch)
    with pytest.raises(VerificationError) as info:
        prepare(config)
    assert tree_digest(failed) == {"mine.txt": tree_digest(failed)["mine.txt"]}
    kept = tmp_path / f"{failed.name}-{os.getpid()}"
    assert str(kept) in str(info.value) and (kept / "verify_violations.jsonl").is_file()
    # a failed folder of ours is replaced by the next failure
    with pytest.raises(VerificationError):
        prepare(PrepareConfig(**{**config.__dict__, "output": str(tmp_path / "again")}))
    with pytest.raises(VerificationError):
        prepare(PrepareConfig(**{**config.__dict__, "output": str(tmp_path / "again")}))
    assert owner.is_ours(failed_dir(tmp_path / "again"))


def test_a_report_with_a_fingerprint_does_not_make_a_folder_ours(tmp_path, tokenizer_dir, capsys):
    _data(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"fingerprint": "abc", "files": {"files": {}}}))
    before = tree_digest(out)
    assert _prepare(tmp_path, tokenizer_dir) == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "earlier beam-sft", "rm -r")
    assert tree_digest(out) == before


def test_a_folder_of_the_previous_version_is_refused_with_how_to_proceed(tmp_path, tokenizer_dir, capsys):
    """Back-compat: a folder prepared before the marker (no .beam-sft-owner) is never replaced; the
    one line says why and what to do (remove it, or give another --output)."""
    _data(tmp_path)
    assert _prepare(tmp_path, tokenizer_dir) == 0
    (tmp_path / "out" / owner.MARKER).unlink()  # as the previous version left it
    before = tree_digest(tmp_path / "out")
    capsys.readouterr()
    assert _prepare(tmp_path, tokenizer_dir, "--no-cache") == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "earlier beam-sft", "another --output")
    assert tree_digest(tmp_path / "out") == before


@pytest.mark.parametrize("content", ["my shopping list\n", "{\"tool\": \"beam-sft\"}"])
def test_a_users_file_named_like_the_lock_is_neither_written_nor_removed(tmp_path, tokenizer_dir, capsys, content):
    _data(tmp_path)
    lock = lock_path(tmp_path / "out")
    lock.write_text(content)
    assert _prepare(tmp_path, tokenizer_dir) == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "not a lock of beam-sft")
    assert lock.read_text() == content


def test_a_link_named_like_the_lock_is_not_written_through(tmp_path, tokenizer_dir, capsys):
    _data(tmp_path)
    target = tmp_path / "precious"
    target.write_text("1234\n")  # even a file that reads like a pid
    os.symlink(target, lock_path(tmp_path / "out"))
    assert _prepare(tmp_path, tokenizer_dir) == 2
    assert_one_line_error(capsys.readouterr().err, "prepare", "symbolic link")
    assert target.read_text() == "1234\n" and lock_path(tmp_path / "out").is_symlink()


def test_a_marker_from_another_host_is_never_taken_for_a_dead_run(tmp_path, tokenizer_dir):
    _data(tmp_path)
    folder = tmp_path / ".out.staging-999997"
    folder.mkdir()
    (folder / owner.MARKER).write_text(json.dumps({**owner.this_run(), "pid": 999997, "host": "elsewhere"}))
    assert _prepare(tmp_path, tokenizer_dir) == 0
    assert folder.is_dir()  # its run may be alive over there


def test_a_reused_pid_does_not_keep_a_dead_runs_staging(tmp_path, tokenizer_dir):
    """The marker's start time tells the run from a later process given the same pid."""
    _data(tmp_path)
    parent = os.getppid()
    folder = tmp_path / f".out.staging-{parent}"
    folder.mkdir()
    (folder / owner.MARKER).write_text(json.dumps({**owner.this_run(), "pid": parent, "started": "1"}))
    assert _prepare(tmp_path, tokenizer_dir) == 0
    assert not folder.exists()


def test_merge_shards_output_is_marked_and_never_a_shard(tmp_path, tokenizer_dir, capsys):
    _data(tmp_path)
    for i in range(2):
        assert _prepare(tmp_path, tokenizer_dir, "--num-shards", "2", "--shard-index", str(i), out=f"s{i}") == 0
    shards = [str(tmp_path / "s0"), str(tmp_path / "s1")]
    before = tree_digest(tmp_path / "s0")
    for target in (tmp_path / "s0", tmp_path / "s0" / "merged", tmp_path / "s1" / ".." / "s0"):
        assert main(["merge-shards", *shards, "--output", str(target), "--quiet"]) == 2
        assert_one_line_error(capsys.readouterr().err, "merge-shards", "refusing to write to")
    assert tree_digest(tmp_path / "s0") == before
    assert main(["merge-shards", *shards, "--output", str(tmp_path / "m"), "--quiet"]) == 0
    assert owner.is_ours(tmp_path / "m")


def test_a_cache_hit_clears_a_dead_runs_lock_and_leaves_a_live_one(tmp_path, tokenizer_dir):
    """A run killed after it published left its lock; the reruns were cache hits,
    which never took the lock, so the dead run's lock stayed for good."""
    import fcntl

    from tests.prepare.test_faults import _dead_pid

    _data(tmp_path)
    assert _prepare(tmp_path, tokenizer_dir) == 0
    lock = lock_path(tmp_path / "out")
    lock.write_text(f"{_dead_pid()}\n")
    assert _prepare(tmp_path, tokenizer_dir) == 0  # a cache hit
    assert not lock.exists()
    lock.write_text(f"{os.getppid()}\n")
    with open(lock, "r+") as held:  # a live writer holds it (another open file description: conflicts)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert _prepare(tmp_path, tokenizer_dir) == 0  # the hit reads the published folder, lock untouched
        assert lock.read_text() == f"{os.getppid()}\n"
    lock.unlink()


def test_a_cache_hit_that_must_still_verify_takes_the_lock(tmp_path, tokenizer_dir, monkeypatch):
    from beam_sft.dataset_folder import lock as lock_module

    _data(tmp_path)
    assert _prepare(tmp_path, tokenizer_dir, "--no-verify") == 0
    taken = []
    real = lock_module.output_lock

    def spy(final):
        taken.append(final)
        return real(final)

    monkeypatch.setattr("beam_sft.prepare.pipeline.output_lock", spy)
    assert _prepare(tmp_path, tokenizer_dir) == 0  # the hit verifies now: verify writes into the folder
    assert taken and json.loads((tmp_path / "out" / "report.json").read_text())["verify"]["ok"] is True


def test_an_empty_staging_folder_of_a_dead_pid_goes_a_full_one_stays(tmp_path, tokenizer_dir):
    """A kill -9 between making the staging folder and marking it leaves it empty and unmarked: only
    an empty one is removed (rmdir), so nothing anyone wrote is lost that way."""
    from tests.prepare.test_faults import _dead_pid

    _data(tmp_path)
    empty, full = tmp_path / f".out.staging-{_dead_pid()}", tmp_path / f".out.old-{_dead_pid()}"
    empty.mkdir()
    full.mkdir()
    (full / "x").write_text("mine")
    assert _prepare(tmp_path, tokenizer_dir) == 0
    assert not empty.exists() and (full / "x").read_text() == "mine"


def test_a_marker_cut_off_mid_write_goes_a_users_marker_file_with_more_stays(tmp_path, tokenizer_dir):
    """A kill -9 inside the marker's write leaves a folder holding only a partial marker (the fault
    tier's kill9-reading-the-records left one): that goes too; a folder with anything else stays, and
    so does one whose only file has the marker's name but not what our write leaves (a user's ``{}``:
    the fuzz tier found it removed)."""
    from beam_sft.dataset_folder.owner import MARKER
    from tests.prepare.test_faults import _dead_pid

    _data(tmp_path)
    pids = iter([_dead_pid() for _ in range(7)])
    cut, empty, kept = (tmp_path / f".out.staging-{next(pids)}" for _ in range(3))
    users = {text: tmp_path / f".out.old-{next(pids)}" for text in ("{}", '{"pid": 1', "notes", '{"tool": "x"')}
    for folder in (cut, empty, kept, *users.values()):
        folder.mkdir()
    (cut / MARKER).write_text('{"tool": "beam-sft", "pid": 1')  # our write, cut off: no one can read it
    (empty / MARKER).write_text("")
    (kept / MARKER).write_text('{"tool": "beam-sft", "pid": 1')
    (kept / "x").write_text("mine")
    for text, folder in users.items():
        (folder / MARKER).write_text(text)
    assert _prepare(tmp_path, tokenizer_dir) == 0
    assert not cut.exists() and not empty.exists()
    assert (kept / "x").read_text() == "mine" and (kept / MARKER).exists()
    for text, folder in users.items():
        assert (folder / MARKER).read_text() == text


# ------------------------------------------------------------------ the content check on every removal

def _dead_marked(folder, pid=None):
    from tests.prepare.test_faults import _dead_pid

    pid = pid if pid is not None else _dead_pid()
    folder.mkdir()
    (folder / owner.MARKER).write_text(json.dumps({**owner.this_run(), "pid": pid, "started": "1"}))
    return folder


def test_a_dead_runs_marked_staging_folder_holding_a_users_file_stays(tmp_path, tokenizer_dir, caplog):
    """A marker (dead pid, this host) proves the folder was made by a run of ours, not that all in it
    is: a file no run writes keeps it, and the run says so."""
    from tests.prepare.test_faults import _dead_pid

    _data(tmp_path)
    pid = _dead_pid()
    kept = _dead_marked(tmp_path / f".out.staging-{pid}", pid)
    (kept / "data-00000-of-00001.arrow").write_bytes(b"ours")
    (kept / "notes.txt").write_text("mine")
    nested = _dead_marked(tmp_path / f".out.old-{pid}", pid)
    (nested / "tokenizer").mkdir()
    (nested / "tokenizer" / "my-vocab-notes.md").write_text("mine")
    gone = _dead_marked(tmp_path / f".out.staging-{pid + 100000}", pid + 100000)  # nothing but ours
    (gone / "tokenizer").mkdir()
    (gone / "tokenizer" / "tokenizer.json").write_text("{}")
    (gone / ".work").mkdir()
    (gone / ".work" / "part-00000001.arrow").write_bytes(b"x")
    (gone / ".report.json.tmp-12").write_text("{")
    before = tree_digest(kept), tree_digest(nested)
    assert _prepare(tmp_path, tokenizer_dir) == 0
    assert (tree_digest(kept), tree_digest(nested)) == before
    assert not gone.exists()
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "notes.txt" in warned and "tokenizer/my-vocab-notes.md" in warned


def test_a_link_inside_a_marked_staging_folder_keeps_it(tmp_path, tokenizer_dir):
    from tests.prepare.test_faults import _dead_pid

    _data(tmp_path)
    pid = _dead_pid()
    folder = _dead_marked(tmp_path / f".out.staging-{pid}", pid)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", folder / "tokenizer")
    assert _prepare(tmp_path, tokenizer_dir) == 0
    assert (folder / "tokenizer").is_symlink()


def test_an_earlier_failed_result_holding_a_users_file_is_kept(tmp_path):
    """verify_then_publish replaces an earlier failed result only through the same check."""
    from beam_sft.dataset_folder.output import remove_ours, unexplained

    folder = _dead_marked(tmp_path / "failed")
    (folder / "report.json").write_text(json.dumps({"files": {"files": {"data-00000-of-00001.arrow": {}}}}))
    (folder / "data-00000-of-00001.arrow").write_bytes(b"x")
    assert unexplained(folder) == []
    (folder / "sub").mkdir()
    (folder / "sub" / "mine").write_text("x")
    assert unexplained(folder) == ["sub/"]
    assert remove_ours(folder, "a test") is False and (folder / "sub" / "mine").exists()
    (folder / "sub" / "mine").unlink()
    (folder / "sub").rmdir()
    assert remove_ours(folder, "a test") is True and not folder.exists()
    assert remove_ours(tmp_path, "not ours") is False and tmp_path.exists()  # no marker: never


def test_prepare_removes_folders_only_through_the_one_function():
    """No other shutil.rmtree of a folder prepare did not just make (the run's own .work scratch and a
    folder it failed to mark are the two it makes itself)."""
    import ast
    import inspect

    from beam_sft.dataset_folder import output
    from beam_sft.prepare import pipeline, shards

    for module, allowed in ((output, {"_make_marked", "remove_ours"}), (pipeline, {"_prepare_into"}), (shards, set())):
        tree = ast.parse(inspect.getsource(module))
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            calls = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr == "rmtree"]
            assert not calls or fn.name in allowed, (module.__name__, fn.name)
