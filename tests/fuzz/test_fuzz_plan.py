"""Fuzz tier: ``beam-sft plan`` on generated hostile configs and flags.

For every generated input: exit 0 with a plan, or exit 2 with exactly one line on stderr (no
traceback); a size key given a value that is not an integer in its range is named in that line.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_sft.train.model_shape import SIZE_KEYS

pytestmark = pytest.mark.fuzz

TINY_BEAM = {"model_type": "beam", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
             "moe_intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1,
             "sliding_window": 4}
KEYS = sorted(TINY_BEAM) + ["layer_types", "mlp_layer_types", "final_logit_softcapping", "tie_word_embeddings"]

hostile = st.one_of(
    st.integers(min_value=-(10**13), max_value=10**13),
    st.sampled_from([0, -1, 1, 2, 3, 7, 129, 2**22 + 1, 10**12, 2**63, True, False]),  # 129: past 128 experts, cheap as layers
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.none(),
    st.lists(st.sampled_from(["sliding_attention", "full_attention", "dense", "sparse", 1, None]), max_size=6),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _run(argv):
    from beam_sft.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["plan", *argv])
        except SystemExit as exc:  # a flag refused by its argparse type (beam_sft.cli_args): one line too
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _check(code, out, err):
    assert code in (0, 2), (code, err)
    if code == 0:
        assert "parameters: total" in out and err == "", err
    else:
        assert out == "" and err.count("\n") == 1 and err.startswith("beam-sft plan: error: "), err
        assert "Traceback" not in err


def _invalid_size(key, value) -> bool:
    if key not in SIZE_KEYS or value is None:
        return False
    low, high = SIZE_KEYS[key]
    return isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(KEYS), hostile, min_size=1, max_size=3))
def test_generated_configs_plan_or_fail_in_one_line(changes, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY_BEAM, **changes}))  # NaN/Infinity as Python's json writes them
    code, out, err = _run(["--model", str(path), "--gpu-memory", "8"])
    _check(code, out, err)
    bad = [key for key, value in changes.items() if _invalid_size(key, value)]
    if len(bad) == 1 and len(changes) == 1:
        assert code == 2 and bad[0] in err, (changes, err)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.one_of(st.lists(st.integers(), max_size=3), st.integers(), st.text(max_size=10), st.none(),
                          st.booleans(), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)))
def test_generated_documents_that_are_not_configs(document, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    code, out, err = _run(["--model", str(path)])
    assert code == 2
    _check(code, out, err)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(memory=st.floats(allow_nan=True, allow_infinity=True), reserve=st.floats(allow_nan=True, allow_infinity=True),
       gpus=st.integers(min_value=-5, max_value=10**9), ep=st.integers(min_value=-2, max_value=16),
       strategy=st.sampled_from(["zero3", "zero2", "fsdp2", "ddp"]))
def test_generated_flags(memory, reserve, gpus, ep, strategy, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_BEAM))
    # FLAG=VALUE: a negative number as a separate word would be taken for an option by argparse
    code, out, err = _run(["--model", str(path), f"--gpu-memory={memory!r}", f"--reserve={reserve!r}",
                           f"--gpus={gpus}", f"--ep-size={ep}", "--strategy", strategy])
    _check(code, out, err)
    if not (math.isfinite(memory) and memory > 0):  # refused, naming a flag (the first bad one checked)
        assert code == 2 and any(f"{flag}:" in err for flag in ("--gpu-memory", "--gpus", "--reserve", "--ep-size")), err
