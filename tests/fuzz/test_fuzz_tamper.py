"""Fuzz tier: tamper with every file of one prepared folder, and with
report.json field by field, and hold verify and train to it.

One small folder is prepared once (the fixture tokenizer; two sources, a weight, a rejected row, a
max_length); each case works on a fresh copy of it. Cases, all generated from the folder itself:

- every file the report digests (the Arrow data, state.json, dataset_info.json, each tokenizer
  file, rejects.jsonl): a byte flipped, the last byte cut, a byte appended; rejects.jsonl also a line
  removed, duplicated and edited;
- report.json, by hand (not sealed again): every number +1 and -1, every string (digests among
  them) changed, every boolean flipped, every key deleted, the file deleted;
- report.json by a forger who seals it again: every count verify can hold to the rows and rejects
  (per source read/kept/selected/rows_out/rejected/formats/weight, the rejects totals, every token
  statistic, the mix, dropped_too_long, the file sizes, shard, version) +1 and -1, and the
  verification's own fields.

For each: ``train``'s check (``data.check_trainable``, what ``resolve_prepared`` runs) refuses and
names the file or the report; ``beam-sft verify`` exits non-zero with a line naming the file or
the rule, never a traceback; and nothing is changed but verify's own outputs (a failure recorded
in a report whose seal held). Hand edits of report.json are all run through verify's first look
(``check_provenance``) and train; every 20th of them, and every top-level deletion, through the
whole ``beam-sft verify`` (its cost is the template compile, ~0.5 s a run; the rest is the same code
path). What only the seal covers (timing, config, fingerprint parts, encoder details: nothing in
the rows can confirm them) is in the hand-edit set, and train refuses its sealed-again edits
through ``verify.verified_report``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beam_sft.cli import main
from beam_sft.dataset_folder import read_report, write_report
from beam_sft.dataset_folder.layout import HISTOGRAM_FILE, REPORT_FILE, REPORT_PAGE, VIOLATIONS_FILE
from beam_sft.errors import BeamError, PreflightError
from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.train.data import check_trainable
from beam_sft.verify.provenance import check_provenance
from tests.encode.conftest import simple_row, write_jsonl

pytestmark = pytest.mark.fuzz

VERIFY_OUTPUTS = (REPORT_FILE, VIOLATIONS_FILE, HISTOGRAM_FILE, REPORT_PAGE)  # the page shows verify's result


@dataclasses.dataclass(frozen=True)
class Pristine:
    folder: Path
    user_files: dict[Path, str]  # the user's data files and their digests: never changed


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, fixture_dir) -> Pristine:
    root = tmp_path_factory.mktemp("tamper")
    a = write_jsonl(root / "a.jsonl", [simple_row(i) for i in range(5)]
                    + [{"messages": [{"role": "user", "content": "no answer"}]}])
    b = write_jsonl(root / "b.jsonl", [simple_row(i, answer="b " * i) for i in range(3)])
    config = PrepareConfig(sources=[SourceSpec(path=str(a)), SourceSpec(path=str(b), weight=2.0)],
                           tokenizer=str(fixture_dir), output=str(root / "out"), num_proc=1, max_length=4096)
    folder = Path(prepare(config))
    assert read_report(folder)["verify"]["ok"] is True
    return Pristine(folder, {p: _sha(p) for p in (a, b)})


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def _copy(pristine: Pristine, tmp_path: Path, name: str) -> Iterator[Path]:
    folder = tmp_path / name
    shutil.copytree(pristine.folder, folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_verify(folder: Path) -> tuple[int, str]:
    """``beam-sft verify DIR`` in this process: (exit code, stderr); a traceback fails the case."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["verify", str(folder), "--no-histogram"])
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), err.getvalue()


def _train_refuses(folder: Path, names: str) -> str | None:
    """None when train's check refuses the folder, with ``names`` in its message; else why not."""
    try:
        check_trainable(folder)
    except PreflightError as exc:
        return None if names in str(exc) else f"train refused without naming {names}: {exc}"
    except Exception as exc:  # noqa: BLE001 (any other exception is a traceback for the user)
        return f"train raised {type(exc).__name__}: {exc}"
    return "train accepted it"


def _verify_fails(folder: Path, names: tuple[str, ...], before: dict[str, bytes]) -> str | None:
    """None when verify exits non-zero with a line holding one of ``names`` and changed nothing but
    its outputs (and the report only where its seal held, to record a failure)."""
    try:
        code, err = _run_verify(folder)
    except Exception as exc:  # noqa: BLE001
        return f"verify raised {type(exc).__name__}: {exc}"
    if code == 0:
        return "verify exited 0"
    if "Traceback" in err:
        return f"verify printed a traceback: {err[-300:]}"
    lines = err.splitlines()
    if not any(any(n in line for n in names) for line in lines):
        return f"no line of verify names {names}: {err[-400:]}"
    after = _snapshot(folder)
    for rel, data in before.items():
        if rel in VERIFY_OUTPUTS:
            continue
        if after.get(rel) != data:
            return f"verify changed {rel}"
    if REPORT_FILE in before and after.get(REPORT_FILE) != before[REPORT_FILE]:
        old, new = json.loads(before[REPORT_FILE]), json.loads(after[REPORT_FILE])
        if new.get("verify", {}).get("ok") is not False:
            return "verify rewrote report.json without recording a failure"
        if {k: v for k, v in old.items() if k not in ("verify", "integrity")} != \
                {k: v for k, v in new.items() if k not in ("verify", "integrity")}:
            return "verify changed report.json beyond its own section"
    if set(after) - set(before) - set(VERIFY_OUTPUTS):
        return f"verify added {sorted(set(after) - set(before))}"
    return None


def _check(failures: list[str], case: str, *problems: str | None) -> None:
    failures.extend(f"{case}: {p}" for p in problems if p is not None)


def _user_files_unchanged(pristine: Pristine) -> None:
    assert {p: _sha(p) for p in pristine.user_files} == pristine.user_files


# --- the folder's files --------------------------------------------------------------------------------


def _byte_edits(data: bytes) -> dict[str, bytes]:
    middle = len(data) // 2
    return {"flip": data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1:], "truncate": data[:-1],
            "append": data + b"\n"}


def _line_edits(data: bytes) -> dict[str, bytes]:
    lines = data.splitlines(keepends=True)
    record = json.loads(lines[0])
    edited = json.dumps({**record, "code": "too_long"}).encode() + b"\n"
    return {"remove line": b"".join(lines[1:]), "duplicate line": b"".join([lines[0], *lines]),
            "edit line": b"".join([edited, *lines[1:]])}


def test_every_file_tampered(pristine, tmp_path):
    files = sorted(read_report(pristine.folder)["files"]["files"])
    assert {"state.json", "dataset_info.json", "rejects.jsonl", "tokenizer/tokenizer_config.json"} <= set(files)
    assert any(f.startswith("data-") for f in files) and len([f for f in files if f.startswith("tokenizer/")]) >= 2
    failures: list[str] = []
    cases = 0
    for rel in files:
        data = (pristine.folder / rel).read_bytes()
        edits = _byte_edits(data) | (_line_edits(data) if rel == "rejects.jsonl" else {})
        for kind, changed in edits.items():
            cases += 1
            with _copy(pristine, tmp_path, f"case{cases}") as folder:
                (folder / rel).write_bytes(changed)
                before = _snapshot(folder)
                _check(failures, f"{rel} {kind}", _train_refuses(folder, str(folder / rel)),
                       _verify_fails(folder, (f"[file_digest]: {rel}: ", f"{rel}"), before),
                       _train_refuses(folder, "refusing to train"))
    _user_files_unchanged(pristine)
    assert cases >= 20 and not failures, "\n".join(failures)


# --- report.json by hand -------------------------------------------------------------------------------


def _leaves(value, path=()) -> Iterator[tuple[tuple, object]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*path, key), inner
            yield from _leaves(inner, (*path, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield (*path, i), inner
            yield from _leaves(inner, (*path, i))


def _set(report: dict, path: tuple, value=None, *, delete: bool = False) -> dict:
    out = json.loads(json.dumps(report))
    target = out
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def _hand_edits(report: dict) -> Iterator[tuple[str, dict]]:
    for path, value in _leaves(report):
        name = ".".join(map(str, path))
        if isinstance(path[-1], str):
            yield f"delete {name}", _set(report, path, delete=True)
        if isinstance(value, bool):
            yield f"flip {name}", _set(report, path, not value)
        elif isinstance(value, (int, float)):
            yield f"{name} +1", _set(report, path, value + 1)
            yield f"{name} -1", _set(report, path, value - 1)
        elif isinstance(value, str):
            changed = (("0" if value[:1] != "0" else "1") + value[1:]) if value else "x"
            yield f"change {name}", _set(report, path, changed)
        elif value is None:
            yield f"{name} set", _set(report, path, 1)


def test_every_report_field_edited_by_hand(pristine, tmp_path):
    report = read_report(pristine.folder)
    failures: list[str] = []
    edits = list(_hand_edits(report))
    assert len(edits) > 300
    with _copy(pristine, tmp_path, "hand") as folder:
        path = folder / REPORT_FILE
        for i, (case, edited) in enumerate(edits):
            path.write_text(json.dumps(edited, indent=2))
            written = path.read_bytes()
            found, writable = check_provenance(folder)
            if not found or found[0].rule != "report_seal" or writable:
                failures.append(f"{case}: verify's first look found {[v.rule for v in found]}")
            _check(failures, case, _train_refuses(folder, str(path)))
            if i % 20 == 0 or (case.startswith("delete ") and "." not in case):
                _check(failures, case, _verify_fails(folder, ("[report_seal]", REPORT_FILE), _snapshot(folder)))
            if path.read_bytes() != written:
                failures.append(f"{case}: report.json was rewritten")
        path.unlink()
        _check(failures, "report.json deleted", _train_refuses(folder, str(path)),
               _verify_fails(folder, ("[report_seal]: report.json is missing",), _snapshot(folder)))
        if path.exists():
            failures.append("report.json deleted: verify wrote one")
    _user_files_unchanged(pristine)
    assert not failures, "\n".join(failures[:50]) + f"\n({len(failures)} in all)"


# --- report.json by a forger who seals it again ---------------------------------------------------------

COUNTED = ("sources", "rejects", "tokens", "mix", "length_policy.dropped_too_long", "files.files", "shard", "version")


def _counted(path: tuple) -> bool:
    name = ".".join(map(str, path))
    if any(name == c or name.startswith(c + ".") for c in COUNTED):
        return not (path[:2] == ("files", "files") and path[-1] == "sha256")  # digests: the next case
    return False


def _forged(report: dict) -> Iterator[tuple[str, dict]]:
    for path, value in _leaves(report):
        if _counted(path) and isinstance(value, (int, float)) and not isinstance(value, bool):
            for step in (1, -1):
                yield f"{'.'.join(map(str, path))} {step:+d}", _set(report, path, value + step)
    for rel in report["files"]["files"]:
        yield f"files.{rel}.sha256 changed", _set(report, ("files", "files", rel, "sha256"), "0" * 64)


def test_every_count_forged_and_sealed_again(pristine, tmp_path):
    report = read_report(pristine.folder)
    failures: list[str] = []
    cases = list(_forged(report))
    assert len(cases) > 60
    rules = ("[report_count]", "[row_count]", "[rejects_count]", "[file_digest]", "[duplicate_row]")
    with _copy(pristine, tmp_path, "forged") as folder:
        for case, edited in cases:
            write_report(folder, edited)
            _check(failures, case, _train_refuses(folder, "refusing to train"),
                   _verify_fails(folder, rules, _snapshot(folder)))
    _user_files_unchanged(pristine)
    assert not failures, "\n".join(failures)


VERIFICATION_EDITS: dict[str, Callable[[dict], None]] = {
    "verify.ok false": lambda r: r["verify"].update(ok=False),
    "verify.full false": lambda r: r["verify"].update(full=False),
    "verify.sample 3": lambda r: r["verify"].update(sample=3),
    "verify.max_length other": lambda r: r["verify"].update(max_length=5),
    "verify.verified_files other": lambda r: r["verify"]["verified_files"].update({"state.json": "0" * 64}),
    "verify.verified_files missing": lambda r: r["verify"].pop("verified_files"),
    "verify.verified_report other": lambda r: r["verify"].update(verified_report="0" * 64),
    "verify deleted": lambda r: r.pop("verify"),
    "kept_aside set": lambda r: r.update(kept_aside="1 violation(s)"),
    "config edited": lambda r: r["config"].update(seed=7),
    "fingerprint_parts edited": lambda r: r["fingerprint_parts"].update(template="0" * 64),
    "encoder edited": lambda r: r["encoder"].update(fallback_rows=1),
    "length_policy.trimmed_rows edited": lambda r: r["length_policy"].update(trimmed_rows=2),
}


@pytest.mark.parametrize("case", sorted(VERIFICATION_EDITS))
def test_verification_fields_forged_and_sealed_again(pristine, tmp_path, case):
    with _copy(pristine, tmp_path, "verification") as folder:
        report = read_report(folder)
        VERIFICATION_EDITS[case](report)
        write_report(folder, report)
        assert _train_refuses(folder, "refusing to train") is None
    _user_files_unchanged(pristine)


def test_the_pristine_folder_passes(pristine, tmp_path):
    """The control: the copies the cases start from verify and train cleanly."""
    with _copy(pristine, tmp_path, "control") as folder:
        code, err = _run_verify(folder)
        assert code == 0, err
        check_trainable(folder)
    with pytest.raises(BeamError):  # and a folder that is not one is refused in one line
        check_trainable(tmp_path)
