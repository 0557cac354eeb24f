"""Rows of real text for the benchmark: every row has its own system prompt and its own tool set.

The text is the documentation that ships inside the installed Python: the docstrings of the
standard library and of the installed packages listed in ``MODULES`` (public, offline, and the
same on every machine with the same versions). Tools are real functions of those modules: name,
first docstring paragraph as description, parameters from ``inspect.signature``; each row draws
its own, so tool declarations and system prompts do not repeat from row to row (unlike the
synthetic set, whose small shared pools flatter every cache).
"""

from __future__ import annotations

import importlib
import inspect
import random
import re

MODULES = ("os", "json", "re", "argparse", "collections", "itertools", "functools", "pathlib", "subprocess",
           "logging", "typing", "email.message", "http.client", "urllib.parse", "asyncio", "datetime",
           "decimal", "statistics", "textwrap", "difflib", "inspect", "ast", "tarfile", "zipfile", "csv",
           "sqlite3", "shutil", "socket", "threading", "multiprocessing", "unittest", "doctest", "pickle",
           "numpy", "jinja2", "yaml", "pyarrow", "tokenizers")


def _docs():
    """(paragraphs, functions) from the modules' docstrings, in a fixed order."""
    paragraphs, functions, seen = [], [], set()
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr in sorted(dir(module)):
            if attr.startswith("_"):
                continue
            obj = getattr(module, attr, None)
            doc = inspect.getdoc(obj) if obj is not None else None
            if not doc or id(obj) in seen:
                continue
            seen.add(id(obj))
            parts = [re.sub(r"\s+", " ", p).strip() for p in doc.split("\n\n")]
            paragraphs.extend(p for p in parts if 40 <= len(p) <= 1200)
            if callable(obj) and parts and attr.isidentifier():
                try:
                    params = [p for p in inspect.signature(obj).parameters.values()
                              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name.isidentifier()]
                except (TypeError, ValueError):
                    continue
                if params:
                    functions.append((f"{name.replace('.', '_')}_{attr}", parts[0][:400], [p.name for p in params[:5]]))
    return paragraphs, functions


def real_text_rows(n: int, seed: int = 0) -> list[dict]:
    """``n`` BeamRows of real text, seeded: system prompt, tools, a call and its result, an answer."""
    paragraphs, functions = _docs()
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        chosen = rng.sample(functions, k=min(len(functions), rng.randint(1, 4)))
        tools = [{"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": {
                p: {"type": "string", "description": rng.choice(paragraphs)[:160]} for p in params},
                "required": params[:1]}}} for name, description, params in chosen]
        name, _, params = chosen[0]
        system = f"{rng.choice(paragraphs)} {rng.choice(paragraphs)}"
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": name, "arguments": {params[0]: rng.choice(paragraphs)[:200]}}}
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": rng.choice(paragraphs)},
            {"role": "assistant", "reasoning_content": rng.choice(paragraphs), "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "name": name, "content": rng.choice(paragraphs)},
            {"role": "assistant", "reasoning_content": rng.choice(paragraphs),
             "content": " ".join(rng.choice(paragraphs) for _ in range(rng.randint(1, 3)))},
        ]
        if rng.random() < 0.5:
            messages += [{"role": "user", "content": rng.choice(paragraphs)},
                         {"role": "assistant", "reasoning_content": rng.choice(paragraphs),
                          "content": rng.choice(paragraphs)}]
        rows.append({"messages": messages, "tools": tools})
    return rows


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    rows = real_text_rows(2000)
    systems = {r["messages"][0]["content"] for r in rows}
    toolsets = {tuple(t["function"]["name"] for t in r["tools"]) for r in rows}
    print(len(rows), "rows;", len(systems), "distinct system prompts;", len(toolsets), "distinct tool sets")
