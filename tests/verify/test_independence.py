"""The verifier shares no code with the encoder, so an encoder bug cannot hide itself.

- By construction: no module of ``beam_sft.verify`` imports ``beam_sft.encode`` (or the
  orchestrator that drives it), at module level or inside a function (read from the source with
  ``ast``), and the package has no import cycle.
- By experiment: a bug planted in the real fast encoder, where its own start-up probe cannot see
  it (only the production call path is wrong), is caught by verification of the prepared output.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

import beam_sft.verify
from beam_sft.verify import verify_prepared
from tests.verify.conftest import beam_rows

PACKAGE = Path(beam_sft.verify.__file__).parent
FORBIDDEN = ("beam_sft.encode", "beam_sft.prepare")


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth of the file (functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_verify_imports_nothing_from_the_encoder():
    # beam_sft.dataset_folder (the folder contract: names, report, tokenizer loader) is not the encoder.
    offenders = {path.name: sorted(m for m in imports_of(path)
                                   if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
                 for path in sorted(PACKAGE.glob("*.py"))}
    assert {name: mods for name, mods in offenders.items() if mods} == {}


def test_the_scan_sees_function_level_imports(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    from beam_sft.encode.fast import FastEncoder\n")
    assert "beam_sft.encode.fast" in imports_of(sample)


def test_verify_package_has_no_import_cycle():
    modules = {f"beam_sft.verify.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    graph = {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 1:
            raise AssertionError("import cycle: " + " -> ".join([*trail[trail.index(name):], name]))
        if state.get(name) == 2:
            return
        state[name] = 1
        for other in sorted(graph[name]):
            visit(other, [*trail, name])
        state[name] = 2

    for name in sorted(graph):
        visit(name, [])


# --- a planted encoder bug ------------------------------------------------------------------------------


def _prepare(tmp_path: Path, fixture_dir: Path) -> Path:
    from beam_sft.prepare import prepare
    from beam_sft.prepare.config import PrepareConfig, SourceSpec

    source = tmp_path / "rows.jsonl"
    rows = [{k: v for k, v in row.items() if k != "meta"} for row in beam_rows()]
    source.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    config = PrepareConfig(sources=[SourceSpec(path=str(source), name="rows")], tokenizer=str(fixture_dir),
                           output=str(tmp_path / "prepared"), max_length=1024, num_proc=1, verify=False,
                           cache=False)
    return Path(prepare(config))


def _plant(monkeypatch, corrupt) -> None:
    """Make the fast encoder's production path (``plain=True``, what prepare's batches call) apply
    ``corrupt(ids, mask) -> (ids, mask)``; the start-up probe calls it without ``plain`` and sees
    a correct encoder, so prepare trusts it."""
    from beam_sft.encode import fast
    from beam_sft.encode.encoded import Encoded

    original = fast.FastEncoder.encode_batch

    def encode_batch(self, rows, plain=False, **kwargs):
        out = original(self, rows, plain=plain, **kwargs)
        if not plain:
            return out
        for item in out:
            if isinstance(item, Encoded):
                item.input_ids, item.assistant_masks = corrupt(item.input_ids.copy(), item.assistant_masks.copy())
        return out

    monkeypatch.setattr(fast.FastEncoder, "encode_batch", encode_batch)


def _encoder_used(directory: Path) -> str:
    return json.loads((directory / "report.json").read_text())["encoder"]["name"]


def test_unplanted_encoder_verifies(tmp_path, fixture_dir):
    directory = _prepare(tmp_path, fixture_dir)
    assert _encoder_used(directory) == "fast"
    assert verify_prepared(directory).ok


def shift_mask(ids: np.ndarray, mask: np.ndarray):
    return ids, np.concatenate([mask[:1] * 0, mask[:-1]])


MESSAGE_ID = 1026  # <|message|> in the fixture tokenizer (checked below)


def drop_context_token(ids: np.ndarray, mask: np.ndarray):
    # The first token of the second message's body (after the system message): the row still reads
    # as well-formed Harmony and its masks still sit on the assistant turns; only the context is wrong.
    body = int(np.flatnonzero(ids == MESSAGE_ID)[1]) + 1
    return np.delete(ids, body), np.delete(mask, body)


def change_context_token(ids: np.ndarray, mask: np.ndarray):
    # One ordinary token id of the second message's body becomes another ordinary one: same length,
    # same markers, same masks; only one token of the context the model is trained on is wrong.
    body = int(np.flatnonzero(ids == MESSAGE_ID)[1]) + 1
    ids[body] = ids[body] + 1 if ids[body] + 1 < MESSAGE_ID - 8 else ids[body] - 1
    return ids, mask


def untrain_one_token(ids: np.ndarray, mask: np.ndarray):
    # One mask bit in the middle of the first trained span turns off: the span is cut in two.
    trained = np.flatnonzero(mask)
    mask[trained[len(trained) // 4]] = 0
    return ids, mask


@pytest.mark.parametrize(("corrupt", "rule"), [(shift_mask, "span_start"), (drop_context_token, "prompt_parity"),
                                               (change_context_token, "prompt_parity"),
                                               (untrain_one_token, "span_count")])
def test_planted_encoder_bug_fails_verification(tmp_path, fixture_dir, tokenizer, monkeypatch, corrupt, rule):
    assert tokenizer.convert_tokens_to_ids("<|message|>") == MESSAGE_ID
    _plant(monkeypatch, corrupt)
    directory = _prepare(tmp_path, fixture_dir)
    assert _encoder_used(directory) == "fast", "the probe must have trusted the planted encoder"
    result = verify_prepared(directory)
    assert not result.ok
    assert result.stats["violations"]["rows"] == len(beam_rows())  # every row, each caught
    assert rule in result.stats["violations"]["by_rule"]
