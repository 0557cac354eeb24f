"""Golden tests: every example of the Beam Harmony format documentation, rendered by our template.

Each case is one of the documentation's examples (same inputs). Its golden files, under
``golden/``, pin the output byte for byte:

- ``<case>.txt``: the complete rendered text (the documentation prints the same text, or a slice
  of it, e.g. only the ``Reasoning effort`` line or the part from the first assistant message);
- ``<case>.mask.json``: the trained (assistant-masked) stretches of the tokenized render, each
  decoded to text, in order;
- ``<case>.error.txt``: for the examples that raise, the error message.

The golden files were produced by rendering with the checkpoint's reference template and checked
by hand against the documentation. To regenerate them (from the reference template, which must be
present) run ``BEAM_UPDATE_GOLDEN=1 pytest tests/harmony/test_template_golden.py`` and review the
diff. The comparison itself never needs the reference: it always renders with our template.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jinja2
import pytest

from tests.doc_examples import (
    BROWSE,
    GET_WEATHER,
    HELLO,
    HISTORY,
    PARALLEL,
    SEARCH,
    SEARCH_FLIGHTS,
    TOOL_LOOP,
    TWO_PLUS_TWO,
    bash_tool,
)

GOLDEN = Path(__file__).parent / "golden"

# The documentation's inputs themselves are defined in tests/doc_examples.py.

# name -> (messages, apply_chat_template keyword arguments). `render` in the documentation means
# add_generation_prompt=True; the training examples render complete conversations without it.
CASES: dict[str, tuple[list[dict], dict]] = {
    "messages_example": (TWO_PLUS_TWO, {}),
    "hello": (HELLO, {"add_generation_prompt": True}),
    "effort_low": (HELLO, {"add_generation_prompt": True, "reasoning_effort": "low"}),
    "effort_100": (HELLO, {"add_generation_prompt": True, "reasoning_effort": 100}),
    "effort_null": (HELLO, {"add_generation_prompt": True, "reasoning_effort": None}),
    "effort_none_label": (HELLO, {"add_generation_prompt": True, "reasoning_effort": "none"}),
    "instructions": (
        [
            {"role": "system", "content": "first message"},
            {"role": "developer", "content": ""},
            {"role": "developer", "content": "second message"},
            *HELLO,
        ],
        {"add_generation_prompt": True},
    ),
    "instructions_late": (
        [
            {"role": "system", "content": "first message"},
            *HELLO,
            {"role": "system", "content": "not rendered"},
            {"role": "user", "content": "Again"},
        ],
        {"add_generation_prompt": True, "tools": [GET_WEATHER]},
    ),
    "tools_get_weather": (HELLO, {"add_generation_prompt": True, "tools": [GET_WEATHER]}),
    "tools_search_flights": (HELLO, {"add_generation_prompt": True, "tools": [SEARCH_FLIGHTS]}),
    "builtin_search_browse": (
        HELLO,
        {"add_generation_prompt": True, "tools": [SEARCH, BROWSE], "builtin_tools": ["search", "browse"]},
    ),
    "bash_trained": (HELLO, {"add_generation_prompt": True, "tools": [bash_tool()]}),
    "bash_custom": (
        HELLO,
        {"add_generation_prompt": True, "tools": [bash_tool(timeout={"type": "integer"})]},
    ),
    "reasoning_missing": (HISTORY, {"add_generation_prompt": True}),
    "reasoning_missing_strict": (HISTORY, {"add_generation_prompt": True, "allow_missing_thinking": False}),
    "reasoning_restored": (
        [HISTORY[0], {**HISTORY[1], "reasoning_content": "The user is greeting me."}, HISTORY[2]],
        {"add_generation_prompt": True, "allow_missing_thinking": False},
    ),
    "tool_loop": (TOOL_LOOP, {"add_generation_prompt": True, "tools": [GET_WEATHER]}),
    "parallel_calls": (PARALLEL, {"add_generation_prompt": True, "tools": [GET_WEATHER]}),
    "training_mask": (TWO_PLUS_TWO, {}),
}


def _outputs(tokenizer, messages, kwargs) -> dict[str, str]:
    """Every golden file's content for one case, rendered with ``tokenizer``'s template."""
    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    except jinja2.TemplateError as exc:
        return {"error.txt": str(exc) + "\n"}
    encoded = tokenizer.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kwargs
    )
    ids, mask = encoded["input_ids"], encoded["assistant_masks"]
    runs: list[list[int]] = []
    for i, (token, trained) in enumerate(zip(ids, mask, strict=True)):
        if trained:
            if i == 0 or not mask[i - 1]:
                runs.append([])
            runs[-1].append(token)
    trained_ids = [token for token, trained in zip(ids, mask, strict=True) if trained]
    return {
        "txt": text,
        "mask.json": json.dumps([tokenizer.decode(run) for run in runs], ensure_ascii=False, indent=1) + "\n",
        "decoded.txt": tokenizer.decode(trained_ids),
    }


def _golden_files(name: str, outputs: dict[str, str]) -> dict[Path, str]:
    # The documentation's "Training masks" example prints the decode of all trained ids.
    keep = {"txt", "mask.json", "error.txt"} | ({"decoded.txt"} if name == "training_mask" else set())
    return {GOLDEN / f"{name}.{suffix}": content for suffix, content in outputs.items() if suffix in keep}


@pytest.mark.parametrize("name", sorted(CASES))
def test_documentation_example(name, tokenizer, request):
    messages, kwargs = CASES[name]
    if os.environ.get("BEAM_UPDATE_GOLDEN") == "1":
        reference = request.getfixturevalue("reference_tokenizer")  # skips when the reference is absent
        GOLDEN.mkdir(exist_ok=True)
        for stale in GOLDEN.glob(f"{name}.*"):
            stale.unlink()
        for path, content in _golden_files(name, _outputs(reference, messages, kwargs)).items():
            path.write_bytes(content.encode("utf-8"))

    expected = sorted(GOLDEN.glob(f"{name}.*"))
    assert expected, f"no golden files for {name!r}: run with BEAM_UPDATE_GOLDEN=1"
    actual = _golden_files(name, _outputs(tokenizer, messages, kwargs))
    assert sorted(actual) == sorted(expected), (
        "our template raises where the reference renders, or vice versa"
    )
    for path, content in actual.items():
        golden = path.read_bytes().decode("utf-8")
        assert content == golden, f"{path.name} differs from the golden file"


def test_golden_directory_has_no_orphans():
    """Every golden file belongs to a case, so a renamed case cannot leave a stale file passing."""
    known = {f"{name}." for name in CASES}
    orphans = [p.name for p in GOLDEN.iterdir() if not any(p.name.startswith(k) for k in known)]
    assert orphans == []
