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

GOLDEN = Path(__file__).parent / "golden"

# ---------------------------------------------------------------- the documentation's inputs

HELLO = [{"role": "user", "content": "Hello!"}]

GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "description": "Forecast length in days"},
            },
            "required": ["city"],
        },
    },
}

SEARCH_FLIGHTS = {
    "type": "function",
    "function": {
        "name": "search_flights",
        "description": "Search for flights between two airports.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "IATA airport code", "examples": ["JFK", "LHR"]},
                "destination": {"type": "string", "description": "IATA airport code"},
                "depart": {"type": "string", "description": "Departure date, YYYY-MM-DD"},
                "return_date": {"type": ["string", "null"]},
                "passengers": {"type": "integer", "default": 1},
                "cabin": {"type": "string", "enum": ["economy", "business", "first"], "default": "economy"},
                "airlines": {"type": "array", "items": {"type": "string"}},
                "budget": {
                    "type": "object",
                    "properties": {"max_price": {"type": "number"}, "currency": {"type": "string"}},
                    "required": ["max_price"],
                },
            },
            "required": ["origin", "destination", "depart"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search for content on the internet using a search engine. The search results include the "
        "website title, address (URL), and description.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "The search query."}},
            "required": ["query"],
        },
    },
}

BROWSE = {
    "type": "function",
    "function": {
        "name": "browse",
        "description": "Visit a webpage and inspect its content. Pass only a URL to fetch/cache the page and return an "
        "approximately 8000-token preview; include a regex pattern to search the full cached page content without "
        "a sandbox. Search results are also capped around 8000 tokens.",
        "parameters": {
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "The website address (URL) of the content to be obtained, "
                    "which can usually be obtained from search results. The page is cached by URL for later "
                    "searches on this tool instance.",
                },
                "pattern": {
                    "type": "string",
                    "description": "Optional regular expression pattern. If omitted, the "
                    "tool fetches and caches the page while returning a capped preview; if provided, it "
                    "searches the full cached page text.",
                },
                "output_mode": {
                    "type": "string",
                    "enum": ["content", "count"],
                    "default": "content",
                    "description": "Search output mode: content returns matching lines; count returns "
                    "only the number of matching lines.",
                },
                "ignore_case": {
                    "type": "boolean",
                    "default": False,
                    "description": "Search without matching letter case.",
                },
                "context_lines": {
                    "type": "integer",
                    "default": 0,
                    "description": "Number of lines before and after each matching line.",
                },
                "multiline": {
                    "type": "boolean",
                    "default": False,
                    "description": "Allow the regular expression to match across line breaks.",
                },
                "max_lines": {
                    "type": "integer",
                    "default": 250,
                    "description": "Maximum search output lines to return after offset. Pass 0 for "
                    "unlimited lines up to output caps.",
                },
                "offset": {
                    "type": "integer",
                    "default": 0,
                    "description": "Skip first N search output lines before applying max_lines.",
                },
            },
            "required": ["url"],
        },
    },
}


def bash_tool(**extra_params):
    return {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "Shell command"}, **extra_params},
                "required": ["command"],
            },
        },
    }


HISTORY = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "How are you?"},
]

TOOL_LOOP = [
    {"role": "user", "content": "What's the weather in London?"},
    {
        "role": "assistant",
        "reasoning_content": "I should check the weather tool.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "London"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "14 C, cloudy"},
]

PARALLEL = [
    {"role": "user", "content": "Compare the weather in London and Paris."},
    {
        "role": "assistant",
        "reasoning_content": "I need both cities.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "London"}},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "14 C, cloudy"},
    {"role": "tool", "tool_call_id": "call_2", "content": "18 C, sunny"},
]

TWO_PLUS_TWO = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "reasoning_content": "Simple arithmetic.", "content": "4"},
]

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
