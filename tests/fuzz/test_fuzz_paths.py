"""Fuzz tier: output paths that alias inputs (symlinks, hard links, ``..``,
trailing slashes, case, absolute or relative), outputs that alias each other, and folders and files
named like our leftovers. For each generated case: the exit code, one error line (no traceback),
nothing of the user's changed (a digest of the tree before and after), every row accounted for.

The oracle knows what each spelling designates by construction (``Spelling.target``), so it does not
share the code under test (``beam_sft.paths`` resolves through the file system).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from beam_sft.convert.cli import rejects_path
from tests.tree import assert_one_line_error, chdir, run_cli, tree_digest

pytestmark = pytest.mark.fuzz

GOOD = {"messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello", "reasoning_content": "greet back"}]}
BAD = {"messages": [{"role": "user", "content": "no answer"}]}  # rejected: no assistant turn


def _workspace(root: Path) -> None:
    """data/x.jsonl (3 rows: 2 kept, 1 rejected), data/sub/y.jsonl (1 row), links to both."""
    (root / "data" / "sub").mkdir(parents=True)
    (root / "data" / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (GOOD, BAD, GOOD)))
    (root / "data" / "sub" / "y.jsonl").write_text(json.dumps(GOOD) + "\n")
    os.link(root / "data" / "x.jsonl", root / "data" / "hard.jsonl")
    os.symlink("x.jsonl", root / "data" / "soft.jsonl")
    os.symlink("data/sub", root / "sublink")
    (root / "elsewhere").mkdir()


@dataclass(frozen=True)
class Spelling:
    text: str  # as given on the command line (relative to the workspace, or absolute)
    target: str  # what it designates, canonical, relative to the workspace ("" is the workspace)
    kind: str  # "file" (an existing file), "dir" (an existing folder), "new" (nothing there), "under-file"


def _spellings(root: Path) -> list[Spelling]:
    a = str(root)
    return [
        Spelling("data/x.jsonl", "data/x.jsonl", "file"),
        Spelling(f"{a}/data/x.jsonl", "data/x.jsonl", "file"),
        Spelling("data/hard.jsonl", "data/x.jsonl", "file"),  # a hard link: the same inode
        Spelling("data/soft.jsonl", "data/x.jsonl", "file"),
        Spelling("data/sub/../x.jsonl", "data/x.jsonl", "file"),
        Spelling("./data//x.jsonl", "data/x.jsonl", "file"),
        Spelling("data/x.jsonl/", "data/x.jsonl", "slash"),
        Spelling("elsewhere/new/", "elsewhere/new", "slash"),
        Spelling("sublink/../x.jsonl", "data/x.jsonl", "file"),  # the kernel applies .. after the link
        Spelling("data/sub", "data/sub", "dir"),
        Spelling("sublink", "data/sub", "dir"),
        Spelling("data/sub/", "data/sub", "dir"),
        Spelling("data", "data", "dir"),
        Spelling("sublink/y.jsonl", "data/sub/y.jsonl", "file"),
        Spelling("data/sub/new.jsonl", "data/sub/new.jsonl", "new"),
        Spelling("sublink/new.jsonl", "data/sub/new.jsonl", "new"),
        Spelling("data/new.jsonl", "data/new.jsonl", "new"),
        Spelling("elsewhere/a.jsonl", "elsewhere/a.jsonl", "new"),
        Spelling("elsewhere/../elsewhere/a.jsonl", "elsewhere/a.jsonl", "new"),
        Spelling(f"{a}/elsewhere/b.jsonl", "elsewhere/b.jsonl", "new"),
        Spelling("elsewhere/deep/er/c.jsonl", "elsewhere/deep/er/c.jsonl", "new"),
        Spelling("data/X.jsonl", "data/X.jsonl", "new"),  # another case: another file here (case-sensitive)
        Spelling("data/x.jsonl/r.jsonl", "data/x.jsonl/r.jsonl", "under-file"),
    ]


def _overlap(a: str, b: str) -> bool:
    """Canonical targets ``a`` and ``b`` are one, or one lies inside the other."""
    pa, pb = Path(a).parts, Path(b).parts
    return pa[:len(pb)] == pb or pb[:len(pa)] == pa


INPUTS = {"file": ["data/x.jsonl"], "dir": ["data/sub"], "both": ["data/x.jsonl", "data/sub"]}
ROWS = {"file": 3, "dir": 1, "both": 4}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=st.sampled_from(sorted(INPUTS)), out_index=st.integers(0, 22),
       rejects_index=st.one_of(st.none(), st.integers(0, 22)))
def test_convert_outputs_never_alias_inputs_or_each_other(inputs, out_index, rejects_index):
    with tempfile.TemporaryDirectory() as tmp, chdir(Path(tmp)):
        root = Path(tmp)
        _workspace(root)
        spellings = _spellings(root)
        out = spellings[out_index]
        rejects = spellings[rejects_index] if rejects_index is not None else None
        outputs = [out] + ([rejects] if rejects else [])
        ins = INPUTS[inputs]
        refused = any(_overlap(o.target, i) for o in outputs for i in ins) \
            or any(o.kind in ("dir", "under-file", "slash") for o in outputs) \
            or (rejects is not None and _overlap(out.target, rejects.target))
        argv = ["convert", *ins, "-o", out.text] + (["--rejects", rejects.text] if rejects else [])
        before = tree_digest(root)
        code, err = run_cli(argv)
        if refused:
            assert code == 2, (argv, err)
            assert_one_line_error(err, "convert", "refusing to write to")
            assert tree_digest(root) == before
            return
        assert code == 0, (argv, err)
        after = tree_digest(root)
        # only the outputs changed: each named entry (a link or a hard link named as an output is replaced
        # itself, by rename: the file it shares with another name stays as it was), and the default
        # rejects file beside -o when --rejects is not given
        rejects_text = rejects.text if rejects else rejects_path(argparse.Namespace(rejects=None, output=out.text))
        entries = {_entry(root, out.text), _entry(root, rejects_text)}
        assert {k: v for k, v in after.items() if k in before and k not in entries} == \
            {k: v for k, v in before.items() if k not in entries}
        kept, rejected = _lines(root / _entry(root, out.text)), _lines(root / _entry(root, rejects_text))
        assert kept + rejected == ROWS[inputs] and kept == ROWS[inputs] - (1 if inputs != "dir" else 0)


def _entry(root: Path, text: str) -> str:
    """The directory entry a spelling names (its folder resolved, its last name kept as written): what
    a staged output's rename replaces."""
    path = Path(text) if Path(text).is_absolute() else root / text
    return os.path.relpath(os.path.join(os.path.realpath(path.parent), path.name), os.path.realpath(root))


# ---------------------------------------------------------------------- train and export: class 1

TRAIN_TARGETS = {  # spelling -> canonical target
    "model": "model", "model/": "model", "model/run": "model/run", "mlink": "model", "mlink/run": "model/run",
    "prep/../model": "model", "prep": "prep", "prep/x/y": "prep/x/y", ".": "", "runs/a": "runs/a",
    "runs/../runs/b": "runs/b", "model2": "model2", "MODEL": "MODEL", "src/a.jsonl": "src/a.jsonl",
    "src": "src", "ckpt/checkpoint-1": "ckpt/checkpoint-1", "ckpt/checkpoint-1/in": "ckpt/checkpoint-1/in",
    "ckpt": "ckpt",
}


@settings(max_examples=60, deadline=None)
@given(spelling=st.sampled_from(sorted(TRAIN_TARGETS)), absolute=st.booleans(), resume=st.booleans())
def test_train_output_dir_is_apart_from_everything_the_run_reads(spelling, absolute, resume):
    from beam_sft.errors import OutputRefused
    from beam_sft.train.data import check_output_dir
    from beam_sft.train.recipe import recipe_from_dict

    with tempfile.TemporaryDirectory() as tmp, chdir(Path(tmp)):
        root = Path(tmp)
        for d in ("model", "prep", "src", "runs", "ckpt/checkpoint-1"):
            (root / d).mkdir(parents=True)
        (root / "model" / "model.safetensors").write_bytes(b"weights")
        (root / "prep" / "report.json").write_text("{}")
        (root / "src" / "a.jsonl").write_text("{}\n")
        os.symlink("model", root / "mlink")
        out = str(root / spelling) if absolute else spelling
        recipe = recipe_from_dict({
            "model": {"path": "model"},
            "data": {"prepared": "prep", "eval": {"prepare": {"sources": [{"path": "src/a.jsonl"}]}}},
            "sft": {"output_dir": out, "use_cpu": True,
                    **({"resume_from_checkpoint": "ckpt/checkpoint-1"} if resume else {})}})
        target = TRAIN_TARGETS[spelling]
        reads = ["model", "prep", "src/a.jsonl"]
        refused = any(_overlap(target, r) for r in reads) or (
            resume and Path("ckpt/checkpoint-1").parts == Path(target).parts[:2]) or (
            not resume and target == "ckpt")  # an earlier run's checkpoints: only a resuming run goes there
        before = tree_digest(root)
        if refused:
            with pytest.raises(OutputRefused):
                check_output_dir(recipe)
        else:
            check_output_dir(recipe)
        assert tree_digest(root) == before


# ---------------------------------------------------------------------- prepare: class 3 leftovers

LEFTOVER_NAMES = [".out.old-{n}", ".out.staging-{n}", ".out.failed-verification", ".out.old-{n}x",
                  ".out.staging-", "out.staging-{n}", ".OUT.old-{n}"]

user_content = st.lists(st.tuples(st.sampled_from(["notes.txt", "report.json", "tokenizer/mine.json",
                                                   ".hidden", "data-00000-of-00001.arrow", "state.json",
                                                   ".beam-sft-owner"]),
                                  st.sampled_from(["x", json.dumps({"fingerprint": "f"}), "{}", "\x00\xff",
                                                   json.dumps({"tool": "other"})])),
                        min_size=1, max_size=3, unique_by=lambda t: t[0])


@settings(max_examples=12, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(leftovers=st.lists(st.tuples(st.sampled_from(LEFTOVER_NAMES), st.integers(1, 2**22), user_content),
                          max_size=3),
       out_content=st.one_of(st.none(), user_content), lock=st.one_of(st.none(), st.sampled_from(
           ["", "12345\n", "shopping list", "{\"pid\": 1}"])))
@example(leftovers=[(".out.staging-{n}", 425, [(".beam-sft-owner", "{}")])], out_content=None, lock=None)  # was removed
def test_prepare_never_removes_or_replaces_what_is_not_its_own(fixture_dir, leftovers, out_content, lock):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(fixture_dir, root / "tok", ignore=shutil.ignore_patterns("*.safetensors"))
        (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (GOOD, BAD, GOOD)))
        for name, n, content in leftovers:
            folder = root / name.format(n=n)
            for rel, text in content:
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_text(text)
        if out_content is not None:
            for rel, text in out_content:
                (root / "out" / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / "out" / rel).write_text(text)
        if lock is not None:
            (root / ".out.lock").write_text(lock)
        before = {k: v for k, v in tree_digest(root).items() if not k.startswith(("tok", "rows.jsonl"))}
        if lock in ("", "12345\n"):  # our lock's own format (empty, or a pid line): a dead run's, taken over
            before.pop(".out.lock")
        code, err = run_cli(["prepare", "--data", str(root / "rows.jsonl"), "--tokenizer", str(root / "tok"),
                          "--output", str(root / "out"), "--num-proc", "1", "--quiet"])
        after = tree_digest(root)
        assert {k: after.get(k) for k in before} == before, err  # nothing of the user's changed or went
        if code != 0:
            assert code == 2, err
            assert_one_line_error(err, "prepare")
            assert not (root / "out" / "dataset_info.json").exists() or out_content is not None
            return
        report = json.loads((root / "out" / "report.json").read_text())
        source = next(iter(report["sources"].values()))
        assert source["read"] == 3 and source["kept"] + sum(source["rejected"].values()) == 3
        assert not [p for p in root.iterdir() if p.name.startswith(".out.") and p.name.endswith(str(os.getpid()))]


def test_the_case_oracle_holds_here(tmp_path):
    """The spellings assume a case-sensitive file system (Linux); say so if it is not."""
    (tmp_path / "a").write_text("x")
    if (tmp_path / "A").exists():
        pytest.skip("case-insensitive file system: data/X.jsonl would be data/x.jsonl")
