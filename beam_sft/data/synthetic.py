"""Seeded synthetic BeamRows for benchmarks and scale tests: multi-turn, reasoning, tool calls.

The text imitates real data where it matters to a tokenizer: words follow a Zipf law over a large
vocabulary (a small vocabulary would flatter a BPE word cache), with numbers, punctuation, code
and non-ASCII characters mixed in. Like real datasets, rows share a handful of system prompts and
tool sets. Nothing here is random at import time: every function takes its own ``random.Random``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

COMMON = (
    "the of and to a in is it that for you on with as was be this are have not or by at from but "
    "what all were when we there can an your which their said if do will each about how up out them "
    "then she many some so these would other into has more her two like him see time could no make "
    "than first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know get through back much go good new write our me man "
    "too any day same right look think also around another came come work three must because does part"
).split()
SYLLABLES = (
    "ka lo mi ne ru sa te vo bri cla dro fen gul hap jin kor lum mos nix pra quo rel sim tav ung vel "
    "wor xen yal zib ark ost ent ion ing ate ure ous ive ful ism ist ment ness ship able tion"
).split()
SNIPPETS = (
    "```python\ndef f(x):\n    return x * 2\n```",
    "`ls -la /tmp`",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "Überprüfung der Größe: 10 µm",
    "東京の天気は晴れです。",
    "emoji 🎉 check ✅",
    "x^2 + y^2 = r^2",
    "{\"status\": \"ok\", \"count\": 3}",
)
SYSTEM_PROMPTS = 6
TOOL_SETS = 8


class TextMaker:
    """Zipf-distributed pseudo-English over ``vocab`` words (seeded)."""

    def __init__(self, seed: int = 0, vocab: int = 30_000):
        rng = random.Random(seed)
        words = list(COMMON)
        seen = set(words)
        while len(words) < vocab:
            word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
            if word not in seen:
                seen.add(word)
                words.append(word)
        self.words = words
        self.cum_weights = []
        total = 0.0
        for rank in range(1, len(words) + 1):
            total += 1.0 / rank
            self.cum_weights.append(total)

    def words_(self, rng: random.Random, n: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum_weights, k=n)

    def text(self, rng: random.Random, n_words: int) -> str:
        out: list[str] = []
        sentence = 0
        for word in self.words_(rng, n_words):
            if sentence == 0:
                word = word.capitalize()
            out.append(word)
            sentence += 1
            roll = rng.random()
            if roll < 0.01:
                out.append(rng.choice(SNIPPETS))
            elif roll < 0.03:
                out.append(str(rng.randint(0, 100_000)))
            if sentence > rng.randint(6, 22):
                out[-1] += rng.choice((".", ".", ".", "?", "!", ":"))
                if rng.random() < 0.2:
                    out[-1] += "\n\n"
                sentence = 0
            elif rng.random() < 0.06:
                out[-1] += ","
        return " ".join(out).replace("\n\n ", "\n\n").strip() + "."


def _tool(rng: random.Random, maker: TextMaker, index: int) -> dict:
    name = "_".join(maker.words_(rng, 2)) + f"_{index}"
    properties = {}
    for p in range(rng.randint(1, 5)):
        kind = rng.choice(("string", "integer", "number", "boolean", "array", "enum"))
        key = f"{maker.words_(rng, 1)[0]}_{p}"
        if kind == "array":
            spec = {"type": "array", "items": {"type": "string"}}
        elif kind == "enum":
            spec = {"type": "string", "enum": maker.words_(rng, 3)}
        else:
            spec = {"type": kind}
        if rng.random() < 0.7:
            spec["description"] = maker.text(rng, rng.randint(4, 14))
        properties[key] = spec
    required = [k for k in properties if rng.random() < 0.6]
    return {"type": "function", "function": {
        "name": name, "description": maker.text(rng, rng.randint(8, 30)),
        "parameters": {"type": "object", "properties": properties, "required": required}}}


def _arguments(rng: random.Random, maker: TextMaker, tool: dict) -> dict:
    args = {}
    for key, spec in tool["function"]["parameters"]["properties"].items():
        kind = spec.get("type")
        if "enum" in spec:
            args[key] = rng.choice(spec["enum"])
        elif kind == "integer":
            args[key] = rng.randint(0, 1000)
        elif kind == "number":
            # Quarters: datasets' Json feature (ujson) reads most decimals back off by one ulp, and the
            # benchmark feeds TRL through it.
            args[key] = rng.randint(0, 400) / 4
        elif kind == "boolean":
            args[key] = rng.random() < 0.5
        elif kind == "array":
            args[key] = maker.words_(rng, rng.randint(1, 4))
        else:
            args[key] = maker.text(rng, rng.randint(2, 12))
    return args


def synthetic_rows(n: int, *, seed: int = 0, scale: float = 1.0, vocab: int = 30_000) -> Iterator[dict]:
    """``n`` BeamRows; ``scale`` multiplies text lengths (1.0 gives about 3,400 gpt-oss tokens a row)."""
    maker = TextMaker(seed, vocab)
    rng = random.Random(seed + 1)
    systems = [maker.text(rng, rng.randint(40, 250)) for _ in range(SYSTEM_PROMPTS)]
    tool_sets = [[_tool(rng, maker, i) for i in range(rng.randint(1, 6))] for _ in range(TOOL_SETS)]

    def length(lo: int, hi: int) -> int:
        return max(1, int(rng.randint(lo, hi) * scale))

    for index in range(n):
        messages: list[dict] = []
        if rng.random() < 0.8:
            messages.append({"role": "system", "content": systems[rng.randrange(SYSTEM_PROMPTS)]})
        tools = tool_sets[rng.randrange(TOOL_SETS)] if rng.random() < 0.6 else None
        for _turn in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": maker.text(rng, length(10, 120))})
            if tools and rng.random() < 0.6:
                calls = []
                for c in range(rng.choice((1, 1, 1, 2))):
                    tool = rng.choice(tools)
                    calls.append({"id": f"call_{index}_{len(messages)}_{c}", "type": "function",
                                  "function": {"name": tool["function"]["name"],
                                               "arguments": _arguments(rng, maker, tool)}})
                messages.append({"role": "assistant", "reasoning_content": maker.text(rng, length(20, 200)),
                                 "tool_calls": calls})
                for call in calls:
                    messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                                     "content": maker.text(rng, length(20, 160))})
            messages.append({"role": "assistant", "reasoning_content": maker.text(rng, length(40, 400)),
                             "content": maker.text(rng, length(30, 300))})
        row: dict = {"messages": messages}
        if tools:
            row["tools"] = tools
        if rng.random() < 0.5:
            row["chat_template_kwargs"] = {"reasoning_effort": rng.choice(("low", "medium", "high", 64))}
        row["meta"] = {"source": "synthetic", "row": index}
        yield row
