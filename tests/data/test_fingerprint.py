"""Fingerprint parts and the output-directory cache."""

from __future__ import annotations

import copy
import json

from beam_sft.data import fingerprint
from beam_sft.dataset_folder import output
from beam_sft.prepare import cache


def test_json_digest_ignores_key_order_but_not_values():
    assert fingerprint.digest_json({"a": 1, "b": 2}) == fingerprint.digest_json({"b": 2, "a": 1})
    assert fingerprint.digest_json({"a": 1}) != fingerprint.digest_json({"a": 1.5})
    assert fingerprint.combine({"x": "1"}) != fingerprint.combine({"x": "2"})


def test_data_digest_of_files_and_folders(tmp_path):
    file = tmp_path / "d" / "a.jsonl"
    file.parent.mkdir()
    file.write_text("one\n")
    folder_before = fingerprint.data_digest(file.parent)
    file_before = fingerprint.data_digest(file)
    (file.parent / "b.jsonl").write_text("two\n")
    assert fingerprint.data_digest(file) == file_before
    assert fingerprint.data_digest(file.parent) != folder_before
    file.write_text("one!\n")
    assert fingerprint.data_digest(file) != file_before
    assert fingerprint.data_digest("org/hub-name") == fingerprint.data_digest("org/hub-name")


def test_tokenizer_digest_sees_flags_and_special_tokens(tokenizer):
    from tokenizers import AddedToken

    base = fingerprint.tokenizer_digest(tokenizer)
    assert fingerprint.tokenizer_digest(copy.deepcopy(tokenizer)) == base
    changed = copy.deepcopy(tokenizer)
    changed.add_tokens([AddedToken("<|new|>", special=False, normalized=False)])
    assert fingerprint.tokenizer_digest(changed) != base
    changed = copy.deepcopy(tokenizer)
    changed.pad_token = changed.eos_token
    assert fingerprint.tokenizer_digest(changed) != base


def _package(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_code_digest_is_the_code_the_entries_import_not_prose(tmp_path, monkeypatch):
    """Keyed by what changes results: a docstring, a comment, a moved line or a module the entry
    does not import leave it as it was; a change of code the entry imports (even inside a
    function, or through a package's __init__) does not."""
    root = tmp_path / "fakepkg_c7"
    files = {
        "__init__.py": "",
        "entry.py": '"""Entry."""\nfrom fakepkg_c7.enc import encode\n\ndef run():\n    from .sub import deep\n    return deep\n',
        "enc.py": '"""Encode."""\n\ndef encode(x):\n    """Docstring."""\n    return x + 1  # comment\n',
        "sub/__init__.py": "from . import deep\n",
        "sub/deep.py": "K = 3\n",
        "elsewhere.py": "def unused():\n    return 1\n",
    }
    _package(root, files)
    monkeypatch.syspath_prepend(str(tmp_path))
    closure = fingerprint.code_closure(["fakepkg_c7.entry"], "fakepkg_c7")
    assert set(closure) == {"fakepkg_c7", "fakepkg_c7.entry", "fakepkg_c7.enc", "fakepkg_c7.sub",
                            "fakepkg_c7.sub.deep"}
    base = fingerprint.closure_digest(["fakepkg_c7.entry"], "fakepkg_c7")

    def digest_with(name: str, text: str) -> str:
        _package(root, {**files, name: text})
        try:
            return fingerprint.closure_digest(["fakepkg_c7.entry"], "fakepkg_c7")
        finally:
            _package(root, files)

    same = [("elsewhere.py", "def unused():\n    return 2\n"),  # not imported by the entry
            ("enc.py", files["enc.py"].replace("Docstring.", "Reworded at length.")),
            ("enc.py", files["enc.py"].replace("# comment", "# another comment")),
            ("enc.py", "\n\n" + files["enc.py"].replace('"""Encode."""', '"""Encode,\nat two lines."""'))]
    for name, text in same:
        assert digest_with(name, text) == base, (name, text)
    changed = [("enc.py", files["enc.py"].replace("x + 1", "x + 2")),
               ("sub/deep.py", "K = 4\n"),  # imported inside a function, through the package
               ("sub/__init__.py", "from . import deep\nJ = 1\n")]
    for name, text in changed:
        assert digest_with(name, text) != base, (name, text)


def test_the_code_digest_is_the_same_in_every_process():
    """``x in {"a", "b"}`` compiles to a frozenset constant, whose repr follows string hashes, salted
    per process: the digest must not (it did: every prepare missed the cache of the one before)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = ("from beam_sft.data import fingerprint as fp\n"
              "print(fp.module_code_digest('def f(x):\\n    return x in {\"alpha\", \"beta\", \"gamma\", \"delta\"}\\n'))\n"
              "print(fp.results_code_digest())\n")
    root = str(Path(__file__).resolve().parents[2])
    outs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root,
                           env={**os.environ, "PYTHONPATH": root, "PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(outs) == 1, outs
    here = fingerprint.module_code_digest('def f(x):\n    return x in {"alpha", "beta", "gamma", "delta"}\n')
    assert outs.pop().split() == [here, fingerprint.results_code_digest()]


def test_the_real_code_digest_holds_encode_verify_and_convert_not_train():
    closure = fingerprint.code_closure(fingerprint.RESULT_ENTRIES, "beam_sft")
    for name in ("beam_sft.encode.fast.render", "beam_sft.encode.template_encode", "beam_sft.convert.pipeline",
                 "beam_sft.verify.invariants", "beam_sft.verify.template", "beam_sft.prepare.batch",
                 "beam_sft.data.mix", "beam_sft.harmony.spans"):
        assert name in closure, name
    assert not [name for name in closure if name.startswith("beam_sft.train") or name == "beam_sft.cli"]


def test_cache_needs_matching_fingerprint_and_complete_dir(tmp_path):
    out = tmp_path / "out"
    staging = output.staging_dir(out)
    (staging / "tokenizer").mkdir()
    (staging / "tokenizer" / "tokenizer.json").write_text("{}")
    (staging / "dataset_info.json").write_text("{}")
    # the report records its files: a prepared folder is replaced only when nothing else is in it
    files = {"dataset_info.json": {}, "tokenizer/tokenizer.json": {}}
    (staging / "report.json").write_text(json.dumps({"fingerprint": "abc", "files": {"files": files}}))
    assert not cache.is_cached(out, "abc")
    output.publish(staging, out)
    assert cache.is_cached(out, "abc") and not cache.is_cached(out, "abd")
    newer = output.staging_dir(out)
    (newer / "report.json").write_text('{"fingerprint": "new"}')
    output.publish(newer, out)
    assert output.read_report(out)["fingerprint"] == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert cache.default_output("0123456789abcdef0123").name == "0123456789abcdef"
