"""Fuzz tier: hostile configs (and duplicate keys in recipes) for every command that
reads one (train's recipe, prepare's and convert's --config): non-finite numbers in every spelling
(NaN, inf, 1e400 and kin) at every float key, a key given twice at any depth, YAML tags, binary bytes.
For each: exit 2, one error line (no traceback) naming the key path or the file, nothing written.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tree import assert_one_line_error, chdir, run_cli, tree_digest

pytestmark = pytest.mark.fuzz

NON_FINITE = [".nan", ".NaN", ".inf", "-.inf", "+.inf", ".Inf", "1e400", "-1e400", "1e309", "1.0e+999",
              "'1e400'", "\"nan\"", "'inf'", "9" * 400 + ".0"]
# float keys of each config, as a key path (list index as an int), in a base config that is valid
RECIPE_BASE = {"model": {"path": "org/name"}, "data": {"prepared": "prep", "prepare": None},
               "sft": {"output_dir": "run", "use_cpu": True, "learning_rate": 1e-4}}
RECIPE_FLOATS = [("sft", "learning_rate"), ("sft", "weight_decay"), ("sft", "max_grad_norm"),
                 ("sft", "warmup_ratio"), ("data", "eval", "eval_fraction")]
PREPARE_BASE = {"sources": [{"path": "a.jsonl", "weight": 1.0}], "tokenizer": "org/name", "output": "out"}
PREPARE_FLOATS = [("sources", 0, "weight")]


def _set(config: dict, path: tuple, value) -> dict:
    import copy

    config = copy.deepcopy(config)
    node = config
    for key in path[:-1]:
        if isinstance(key, str) and (key not in node or node[key] is None):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return config


def _dotted(path: tuple) -> str:
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


@contextlib.contextmanager
def _workspace():
    with tempfile.TemporaryDirectory() as tmp, chdir(Path(tmp)) as root:
        yield root


def _refused(command: str, config: str | bytes, needle: str | None = None) -> None:
    """``command`` with ``config`` as its --config: exit 2, one error line (holding ``needle``), and
    nothing written where it ran."""
    with _workspace() as root:
        path = root / "c.yaml"
        path.write_bytes(config if isinstance(config, bytes) else config.encode())
        (root / "a.jsonl").write_text("{}\n")
        before = tree_digest(root)
        code, err = run_cli(_argv(command, path))
        assert code == 2, (config, err)
        assert_one_line_error(err, command, *([needle] if needle else []))
        assert tree_digest(root) == before  # nothing written (no PWNED from a tag either)


def _argv(command: str, config: Path) -> list[str]:
    if command == "convert":
        return ["convert", "a.jsonl", "-o", "rows.jsonl", "--config", str(config)]
    return [command, "--config", str(config)]


PLACEHOLDER = "__VALUE__"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(["train", "prepare"]), index=st.integers(0, 10), spelling=st.sampled_from(NON_FINITE))
def test_a_non_finite_number_at_any_float_key_is_refused_with_its_path(which, index, spelling):
    base, floats, prefix = ((RECIPE_BASE, RECIPE_FLOATS, "") if which == "train"
                            else (PREPARE_BASE, PREPARE_FLOATS, ""))
    path = floats[index % len(floats)]
    text = yaml.safe_dump(_set(base, path, PLACEHOLDER), sort_keys=False).replace(PLACEHOLDER, spelling)
    _refused(which, text, prefix + _dotted(path))


def _yaml_with_duplicate(config: dict, path: tuple) -> str:
    """``config`` as YAML, with the key at ``path`` written twice (the second time with another value)."""
    text = yaml.safe_dump(_set(config, path, PLACEHOLDER), sort_keys=False, default_flow_style=False)
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if PLACEHOLDER in line)
    line = lines[i]
    indent = line[: len(line) - len(line.lstrip(" -"))].replace("-", " ")
    key = line.strip(" -").split(":")[0]
    lines[i] = line.replace(PLACEHOLDER, "1")
    lines.insert(i + 1, f"{indent}{key}: 2")
    return "\n".join(lines) + "\n"


DUP_PATHS = {"train": [("sft", "learning_rate"), ("sft", "output_dir"), ("model", "path"), ("data", "prepared"),
                       ("data", "allow_unverified"), ("lora", "r"), ("preflight", "timeout")],
             "prepare": [("sources", 0, "weight"), ("sources", 0, "path"), ("max_length",), ("seed",),
                         ("tokenizer",)],
             "convert": [("missing_reasoning",), ("columns", "messages"), ("require_declared_tools",)]}
CONVERT_BASE = {"missing_reasoning": "drop"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(sorted(DUP_PATHS)), index=st.integers(0, 10))
def test_a_key_given_twice_is_refused_with_its_path(command, index):
    base = {"train": RECIPE_BASE, "prepare": PREPARE_BASE, "convert": CONVERT_BASE}[command]
    path = DUP_PATHS[command][index % len(DUP_PATHS[command])]
    _refused(command, _yaml_with_duplicate(base, path), f"{_dotted(path)}: given twice")


TAGS = ["!!python/object:os.system", "!!python/object/apply:os.system ['touch PWNED']",
        "!!python/name:os.system", "!!python/module:os", "!custom 1", "!!binary aGVsbG8=", "!!set {a, b}",
        "!!timestamp 2001-12-14", "!<tag:yaml.org,2002:python/tuple> [1, 2]"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(sorted(DUP_PATHS)), tag=st.sampled_from(TAGS), index=st.integers(0, 10))
def test_a_tag_is_refused_in_one_line_and_never_run(command, tag, index):
    base = {"train": RECIPE_BASE, "prepare": PREPARE_BASE, "convert": CONVERT_BASE}[command]
    path = DUP_PATHS[command][index % len(DUP_PATHS[command])]
    text = yaml.safe_dump(_set(base, path, PLACEHOLDER), sort_keys=False).replace(f"'{PLACEHOLDER}'", tag) \
        .replace(PLACEHOLDER, tag)
    _refused(command, text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(command=st.sampled_from(sorted(DUP_PATHS)), data=st.binary(min_size=1, max_size=200))
def test_binary_bytes_as_a_config_are_one_line(command, data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        _refused(command, data, "not a YAML text file")
        return
    with _workspace() as root:
        (root / "c.yaml").write_bytes(data)
        (root / "a.jsonl").write_text("{}\n")
        before = tree_digest(root)
        code, err = run_cli(_argv(command, root / "c.yaml"))
        assert code != 0 or command == "convert", err  # convert may read harmless text as no options
        if code != 0:
            assert "Traceback" not in err
            assert code in (1, 2), err
            if code == 2:
                assert_one_line_error(err, command)
        assert {k: v for k, v in tree_digest(root).items() if k in before} == before


hostile_text = st.lists(st.sampled_from(["\x00", "/", ".", "..", "\n", " ", "a", "é", "\u202e", "~", "*", "\\",
                                        ":", "x" * 120]), min_size=1, max_size=8).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from([("sft", "output_dir"), ("data", "prepared"), ("model", "path")]), value=hostile_text)
def test_hostile_path_strings_in_a_recipe_are_one_line(key, value):
    """Any string at a path key (NUL bytes, newlines, names too long, `..`): exit 2 and one line, nothing
    written; the data folder never exists here, so no run gets past its checks."""
    config = _set(RECIPE_BASE, key, value)
    with _workspace() as root:
        (root / "c.yaml").write_text(yaml.safe_dump(config))
        before = tree_digest(root)
        code, err = run_cli(["train", "--config", str(root / "c.yaml")])
        assert code == 2, (value, err)
        assert_one_line_error(err, "train")
        assert tree_digest(root) == before
