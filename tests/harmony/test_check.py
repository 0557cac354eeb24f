"""check_tokenizer names every rule a tokenizer breaks; `beam-sft check-tokenizer` reports them."""

from __future__ import annotations

import json
import re

import pytest

from beam_sft.errors import TokenizerError
from beam_sft.harmony import markers
from beam_sft.harmony.check import check_tokenizer, require_fit_tokenizer, tokenizer_warnings


@pytest.fixture
def fresh(fixture_dir):
    """A private copy of the fixture tokenizer, free to break."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(fixture_dir)


def without_added_token(tokenizer, marker: str):
    """The same tokenizer, except that ``marker`` is plain text (split by BPE into pieces)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    data = json.loads(tokenizer.backend_tokenizer.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != marker]
    broken = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(data)),
        eos_token=tokenizer.eos_token,
        pad_token=tokenizer.pad_token,
        clean_up_tokenization_spaces=False,
    )
    broken.chat_template = tokenizer.chat_template
    broken.response_template = tokenizer.response_template
    return broken


def rules(problems: list[str]) -> set[str]:
    return {re.match(r"\[([a-z-]+)\]", p).group(1) for p in problems}


def test_the_fixture_is_fit(tokenizer):
    assert check_tokenizer(tokenizer) == []
    assert tokenizer_warnings(tokenizer) == []
    assert require_fit_tokenizer(tokenizer) == []


def test_a_split_marker_is_named(tokenizer):
    broken = without_added_token(tokenizer, markers.END)
    problems = check_tokenizer(broken)
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        f"[marker-single-token] {markers.END} must encode to exactly one token that decodes back to it, got "
    )


@pytest.mark.parametrize("marker", [m for m in markers.ALL_MARKERS if m != markers.RETURN])
def test_a_special_marker_other_than_return_is_named(fresh, marker):
    from tokenizers import AddedToken

    fresh.add_special_tokens(
        {"additional_special_tokens": [AddedToken(marker, special=True, normalized=False)]}
    )
    problems = check_tokenizer(fresh)
    assert problems == [
        f"[marker-not-special] {marker} must not be a special token: decoding with skip_special_tokens=True "
        "would drop it and lose message boundaries"
    ]


def test_return_must_be_special(tokenizer):
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    data = json.loads(tokenizer.backend_tokenizer.to_str())
    for token in data["added_tokens"]:
        if token["content"] == markers.RETURN:
            token["special"] = False
    plain = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(data)), pad_token=tokenizer.pad_token
    )
    plain.chat_template = tokenizer.chat_template
    problems = check_tokenizer(plain)
    assert "[return-special] <|return|> must be a special token (it is the end of sequence)" in problems
    assert "[eos] the eos token must be <|return|>, got None" in problems


def test_wrong_eos_is_named(fresh):
    fresh.eos_token = "<|endoftext|>"
    assert check_tokenizer(fresh) == ["[eos] the eos token must be <|return|>, got '<|endoftext|>'"]


def test_pad_token_rules(fresh):
    fresh.pad_token = None
    assert rules(check_tokenizer(fresh)) == {"pad-token"}
    fresh.pad_token = markers.RETURN
    assert any("pad-token" in p and markers.RETURN in p for p in check_tokenizer(fresh))


def test_a_template_without_generation_blocks_is_rejected(fresh):
    fresh.chat_template = re.sub(r"\{%-?\s*(?:end)?generation\s*-?%\}", "", fresh.chat_template)
    problems = check_tokenizer(fresh)
    assert rules(problems) == {"generation-blocks"}
    assert "{% generation %}" in problems[0]


def test_generation_blocks_that_mark_nothing_are_rejected(fresh):
    """The tag is present, so only the mask probe can tell that it marks no assistant turn."""
    stripped = re.sub(r"\{%-?\s*(?:end)?generation\s*-?%\}", "", fresh.chat_template)
    fresh.chat_template = stripped + "{% generation %}{% endgeneration %}"
    problems = check_tokenizer(fresh)
    assert problems == [
        "[generation-blocks] the assistant mask of the probe has 0 span(s), expected one per assistant turn (2)"
    ]


def test_generation_blocks_in_the_wrong_place_are_rejected(fresh, reference_template):
    """A span must start at <|channel|>: one that also covers the <|start|>assistant header is wrong."""
    moved = reference_template.replace(
        '{{- "<|start|>assistant" }}\n        {%- generation %}',
        '{%- generation %}\n        {{- "<|start|>assistant" }}',
    )
    assert moved != reference_template
    fresh.chat_template = moved
    problems = check_tokenizer(fresh)
    assert len(problems) == 2 and rules(problems) == {"generation-blocks"}
    assert "<|start|>assistant<|channel|>analysis" in problems[0]


def test_no_chat_template_and_a_broken_one(fresh):
    fresh.chat_template = None
    assert check_tokenizer(fresh) == ["[chat-template] the tokenizer has no chat template"]
    fresh.chat_template = "{% generation %}{{ raise_exception('boom') }}{% endgeneration %}"
    problems = check_tokenizer(fresh)
    assert (
        len(problems) == 1
        and problems[0].startswith("[chat-template] rendering the probe")
        and "boom" in problems[0]
    )


def test_a_slow_tokenizer_is_named(fresh):
    class Slow(type(fresh)):
        is_fast = False

    fresh.__class__ = Slow
    assert check_tokenizer(fresh) == [
        "[fast-tokenizer] the tokenizer must be a fast tokenizer (assistant masks need offsets)"
    ]


def test_every_problem_is_reported_at_once(tokenizer):
    broken = without_added_token(tokenizer, markers.CHANNEL)
    broken.eos_token = "<|endoftext|>"
    broken.pad_token = None
    broken.chat_template = re.sub(r"\{%-?\s*(?:end)?generation\s*-?%\}", "", tokenizer.chat_template)
    problems = check_tokenizer(broken)
    assert {"marker-single-token", "eos", "pad-token", "generation-blocks"} <= rules(problems)
    with pytest.raises(TokenizerError) as info:
        require_fit_tokenizer(broken)
    assert info.value.problems == problems
    assert all(p in str(info.value) for p in problems)


def test_a_missing_response_template_is_only_a_warning(fresh):
    fresh.response_template = None
    assert check_tokenizer(fresh) == []
    assert tokenizer_warnings(fresh) == [
        "[response-template] no response template: tokenizer.parse_response cannot read generated text"
    ]
    assert require_fit_tokenizer(fresh) == tokenizer_warnings(fresh)


def test_a_wrong_response_template_is_a_warning(fresh):
    from beam_sft.harmony.response import response_template

    template = response_template()
    template["fields"]["thinking"]["open"] = "<|channel|>commentary<|message|>"
    fresh.response_template = template
    warnings = tokenizer_warnings(fresh)
    assert len(warnings) == 2 and all(
        w.startswith("[response-template] the probe's messages[") for w in warnings
    )


# --- beam-sft check-tokenizer --------------------------------------------------------------------


@pytest.fixture
def cli_main(monkeypatch):
    """beam_sft.cli.main with only this area's commands, so other areas' modules cannot break it."""
    import beam_sft.cli

    monkeypatch.setattr(beam_sft.cli, "COMMAND_MODULES", ("beam_sft.harmony.cli",))
    return beam_sft.cli.main


def test_check_tokenizer_command_accepts_the_fixture(cli_main, fixture_dir, capsys):
    assert cli_main(["check-tokenizer", str(fixture_dir)]) == 0
    assert "fit for Beam Harmony" in capsys.readouterr().out


def test_check_tokenizer_command_lists_problems(cli_main, fresh, tmp_path, capsys):
    fresh.eos_token = "<|endoftext|>"
    fresh.pad_token = None
    fresh.response_template = None
    fresh.save_pretrained(tmp_path)
    assert cli_main(["check-tokenizer", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "2 problem(s)" in out
    assert "  - [eos] the eos token must be <|return|>, got '<|endoftext|>'" in out
    assert "  - [pad-token]" in out
    assert "warning: [response-template]" in out


def test_the_reference_template_is_fit(reference_tokenizer):
    """The checkpoint's own template passes the checks, masks and response probe included."""
    assert check_tokenizer(reference_tokenizer) == []
    assert tokenizer_warnings(reference_tokenizer) == []


def test_check_tokenizer_command_on_a_missing_path(cli_main, tmp_path, capsys):
    assert cli_main(["check-tokenizer", str(tmp_path / "missing")]) == 2
    assert "cannot load a tokenizer" in capsys.readouterr().err
