"""The Beam Harmony format documentation's example inputs, defined once for the whole test suite.

Each value here is an input that one of the documentation's examples renders or parses (the
tools, the conversations, and ``render``, which in the documentation means
``apply_chat_template`` with ``add_generation_prompt=True``). The golden tests pin what our
template makes of them byte for byte, so keep every value exactly as the documentation writes it:
a changed key order or description changes the rendered text.

Treat them as read-only: tests share these objects, so build a modified copy (``{**HELLO[0], ...}``)
rather than changing one in place.
"""

from __future__ import annotations

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

# The same tool without the ``days`` description: the verify tests' prepared dataset was built
# with this variant (its token ids would change with the description), so it stays distinct.
GET_WEATHER_TERSE = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
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

# The trained definition of the built-in ``search`` tool.
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

# The trained definition of the built-in ``browse`` tool.
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
    """The documentation's ``bash`` tool (the trained definition), plus ``extra_params`` properties."""
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

# A call, its result, and the turn still to be generated.
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


def render(tokenizer, messages, **kwargs):
    """The documentation's ``render``: the prompt text, with the generation prompt appended."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
