"""Rows for verify's differential tests and its benchmark (``benchmarks/bench_verify.py``): real-ish
and diverse, as real datasets are: every row has its own system prompt and its own tool set (names,
descriptions and schemas), and all text is drawn from the real public conversations under
``../shared/corpus`` (every string of 40+ characters there, cut at random word boundaries and
stitched together), or from ``beam_sft.data.synthetic``'s Zipf text when the corpus is absent.
Nothing is shared between rows that a cache could exploit.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"
REALISTIC = ROOT / ".cache" / "gptoss-tokenizer" / "beam"


def corpus_texts(corpus: Path = CORPUS, minimum: int = 40) -> list[str]:
    """Every string of at least ``minimum`` characters in the corpus's JSON/JSONL files."""
    out: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            if len(value) >= minimum:
                out.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted(corpus.rglob("*.json*")):
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            walk(json.loads(text))
            continue
        except ValueError:
            pass
        for line in text.splitlines():
            try:
                walk(json.loads(line))
            except ValueError:
                continue
    return out


# Harmony markers and reasoning tags in real text would (rightly) be rejected by convert; keep them out.
_BANNED = ("<|", "|>", "<think>", "</think>", "<thinking>", "</thinking>", "<reasoning>", "</reasoning>",
           "<tool_call>", "</tool_call>", "</rfl:parameter>")


class RealText:
    """Pieces of real text at random word boundaries, or synthetic Zipf text without the corpus."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        pool = corpus_texts() if CORPUS.is_dir() else []
        self.words = [w for t in pool for w in t.split() if not any(b in w for b in _BANNED)]
        if not self.words:
            from beam_sft.data.synthetic import TextMaker

            maker = TextMaker(seed)
            self.words = maker.words_(self.rng, 500_000)

    def text(self, n_words: int) -> str:
        start = self.rng.randrange(max(1, len(self.words) - n_words))
        words = self.words[start:start + n_words]
        # Runs of real text, with a fresh number now and then so no two rows repeat each other.
        if self.rng.random() < 0.5:
            words.insert(self.rng.randrange(len(words) + 1), str(self.rng.randrange(10**9)))
        return " ".join(words)


def _tool(text: RealText, rng: random.Random, row: int, k: int) -> dict:
    properties = {}
    for p in range(rng.randint(1, 5)):
        kind = rng.choice(("string", "integer", "number", "boolean", "array"))
        spec: dict = {"type": kind} if kind != "array" else {"type": "array", "items": {"type": "string"}}
        if rng.random() < 0.7:
            spec["description"] = text.text(rng.randint(4, 16))
        properties[f"p{p}_{rng.randrange(10**6)}"] = spec
    return {"type": "function", "function": {
        "name": f"tool_{row}_{k}_{rng.randrange(10**6)}", "description": text.text(rng.randint(8, 40)),
        "parameters": {"type": "object", "properties": properties,
                       "required": [key for key in properties if rng.random() < 0.5]}}}


def _arguments(text: RealText, rng: random.Random, tool: dict) -> dict:
    args = {}
    for key, spec in tool["function"]["parameters"]["properties"].items():
        kind = spec["type"]
        args[key] = {"integer": lambda: rng.randint(0, 10**6), "number": lambda: rng.randint(0, 4000) / 4,
                     "boolean": lambda: rng.random() < 0.5,
                     "array": lambda: text.text(rng.randint(1, 4)).split()}.get(
            kind, lambda: text.text(rng.randint(2, 20)))()
    return args


def bench_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` BeamRows, each with its own system prompt and (most) with their own tools."""
    text = RealText(seed)
    rng = random.Random(seed + 1)
    rows = []
    for index in range(n):
        messages: list[dict] = [{"role": "system", "content": text.text(rng.randint(40, 300))}]
        tools = [_tool(text, rng, index, k) for k in range(rng.randint(1, 5))] if rng.random() < 0.7 else None
        for _turn in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": text.text(rng.randint(10, 150))})
            if tools and rng.random() < 0.6:
                calls = [{"id": f"c{index}_{len(messages)}_{c}", "type": "function",
                          "function": {"name": tool["function"]["name"], "arguments": _arguments(text, rng, tool)}}
                         for c, tool in enumerate(rng.choices(tools, k=rng.choice((1, 1, 2))))]
                messages.append({"role": "assistant", "reasoning_content": text.text(rng.randint(20, 200)),
                                 "tool_calls": calls})
                messages += [{"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                              "content": text.text(rng.randint(20, 160))} for call in calls]
            messages.append({"role": "assistant", "reasoning_content": text.text(rng.randint(40, 400)),
                             "content": text.text(rng.randint(30, 300))})
        row: dict = {"messages": messages}
        if tools:
            row["tools"] = tools
        if rng.random() < 0.5:
            row["chat_template_kwargs"] = {"reasoning_effort": rng.choice(("low", "medium", "high", 64))}
        rows.append(row)
    return rows


