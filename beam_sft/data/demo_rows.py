"""Seeded rows a tiny model can learn Beam Harmony from (``make demo``), and the content where it can.

``synthetic.py`` imitates real text for benchmarks (a large Zipf vocabulary); this generator does the
opposite on purpose: a small closed vocabulary in a few task shapes, so that a model of a few hundred
thousand parameters, trained for a couple of minutes on two CPU cores, learns the *structure* of a
Beam turn: an analysis message, then a final answer or tool calls whose arguments satisfy the declared
schema, then ``<|return|>`` or ``<|call|>``. The content it could learn is copying: every value a
call takes (a city, a word, the two numbers of an add) is in the prompt, one token of the demo's
tokenizer (``tokenizer_corpus``), drawn from dozens of values (``copied_values``), so memorising one
value does not pay; most plain turns say values back (``ECHO_SHARE``), the same copy many times a row.

The shapes (``KINDS``), each with reasoning on every assistant turn and a reasoning effort
(``chat_template_kwargs.reasoning_effort``: low, medium or high) on most rows:

* ``chat``:  one question, one answer (values said back, a fact from a small table, or a sum).
* ``multi``: two or three question/answer turns.
* ``tool``:  tools declared (a weather tool with an ``enum`` unit, an adder with integers, a lookup
  with a string and a boolean); the assistant calls one, reads the result, answers.
* ``tool_multi``: a tool turn, then a plain follow-up turn.

Training rows take ``TRAIN_MIX`` in turn (two in three call a tool), held-out rows ``KINDS``.
``demo_split(n_train, n_eval, seed)`` returns training and held-out rows whose first user messages
never coincide, so the held-out figures measure generalisation, not recall (the capital questions,
eight in all, are therefore never held out; sums, weather, look-ups and values said back are), while
every value a held-out call copies occurs in training rows (copying is learnable, the question new).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

# Many distinct values of every copied argument, so that memorising one value (the collapse: every
# call the same city or numbers) does not pay and copying from the prompt does.
CITIES = ("Paris", "London", "Berlin", "Madrid", "Rome", "Oslo", "Tokyo", "Lima", "Cairo", "Delhi", "Seoul",
          "Dublin", "Vienna", "Prague", "Lisbon", "Athens", "Boston", "Denver", "Dallas", "Austin", "Miami",
          "Chicago", "Toronto", "Sydney", "Perth", "Nairobi", "Lagos", "Accra", "Dakar", "Tunis", "Riga", "Milan")
CONDITIONS = ("sunny", "cloudy", "rain", "snow", "windy")
UNITS = ("celsius", "fahrenheit")
MEANINGS = {
    "cat": "a small animal", "model": "a thing that predicts text", "parser": "a program that reads text",
    "report": "a short summary", "answer": "the reply to a question", "number": "a count of things",
    "tool": "a function the assistant can call", "poem": "a short piece of verse", "city": "a large town",
    "river": "a stream of water", "forecast": "what the weather will be", "function": "code with a name",
    "error": "something that went wrong", "deadline": "the last day to finish", "search": "a way to find things",
    "message": "text sent to someone", "table": "rows and columns", "step": "one part of a plan",
    "bird": "an animal that flies", "tree": "a tall plant", "song": "music with words", "book": "pages bound together",
    "chair": "a seat for one", "bread": "food baked from flour", "lamp": "a thing that gives light",
    "key": "it opens a lock", "map": "a drawing of a place", "clock": "it shows the time", "boat": "it floats on water",
    "garden": "a place where plants grow", "letter": "a written message", "window": "glass in a wall",
    "bridge": "a way over a river", "coin": "a small piece of money", "storm": "strong wind and rain",
    "planet": "a world that circles a star",
}
WORDS = tuple(MEANINGS)
CAPITALS = {"France": "Paris", "England": "London", "Germany": "Berlin", "Spain": "Madrid", "Italy": "Rome",
            "Norway": "Oslo", "Japan": "Tokyo", "Peru": "Lima"}
ECHO_SHARE = 0.6  # of the plain turns: say values back
ADD_RANGE = (10, 59)  # each number one token of the demo's tokenizer: 2500 pairs, none worth memorising
EFFORTS = ("low", "medium", "high")
KINDS = ("chat", "multi", "tool", "tool_multi")
# The training rows' cycle of kinds: two in three call a tool (the copy is what takes the most rows to
# learn); the held-out rows take KINDS in turn (half with tools, as format health chooses its prompts).
TRAIN_MIX = ("tool", "chat", "tool", "multi", "tool_multi", "tool")
SYSTEM = "You are Beam, a helpful assistant."

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city."},
            "unit": {"type": "string", "enum": list(UNITS)},
            "days": {"type": "integer", "description": "How many days ahead."}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "lookup", "description": "Look up a word.",
        "parameters": {"type": "object", "properties": {
            "word": {"type": "string"}, "count": {"type": "integer"}, "short": {"type": "boolean"}},
            "required": ["word", "count"], "additionalProperties": False}}},
]


def _question(rng: random.Random) -> tuple[str, str, str]:
    """(question, reasoning, answer) of one plain turn: most say values back (the copy the tool calls
    need, many times a row: the signal that teaches a tiny model to copy at all), the rest are a fact
    from a small table or a sum."""
    draw = rng.random()
    if draw < ECHO_SHARE:
        values = ", ".join(f'"{v}"' for v in rng.sample(copied_values(), rng.randint(2, 4)))
        return f"Say these back: {values}.", "The user wants the values back.", f"{values}."
    if draw < ECHO_SHARE + (1 - ECHO_SHARE) / 2:
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        return (f"What is {a} plus {b}?", f"The user asks for a sum. {a} plus {b} is {a + b}.",
                f"{a} plus {b} is {a + b}.")
    country = rng.choice(list(CAPITALS))
    city = CAPITALS[country]
    return (f"What is the capital of {country}?", f"The user asks about {country}. The capital is {city}.",
            f"The capital of {country} is {city}.")


def _tool_turn(rng: random.Random, index: int) -> tuple[str, dict, str, str, str]:
    """(question, call, reasoning, result, answer) of one tool turn.

    Every value the call copies is written in the prompt as the call writes it, right after a quote or
    ``=``: ``"Cairo"`` and ``a=17`` are the tokens of ``Cairo`` and ``17`` on their own, the tokens of the
    call's XML parameter (one token each: ``tokenizer_corpus``). Written after a space (``in Cairo``) the
    token would differ (`` Cairo`` against ``Cairo``) and a tiny model would have to learn that mapping
    per value instead of one copy rule. The reasoning names the tool, not the values: one copy (prompt
    to call) to learn, not two in a row. The answer copies the tool result the same way.
    """
    tool = rng.choice(("get_weather", "add", "lookup"))
    if tool == "get_weather":
        city, unit = rng.choice(CITIES), rng.choice(UNITS)
        degrees = rng.randint(0, 30) if unit == "celsius" else rng.randint(32, 86)
        condition = rng.choice(CONDITIONS)
        arguments: dict = {"city": city, "unit": unit}
        days = ""
        if rng.random() < 0.6:
            arguments["days"] = rng.randint(1, 7)
            days = f", days={arguments['days']}"
        question = f'What is the weather in "{city}"? unit={unit}{days}.'
        reasoning = "The user wants the weather. I call get_weather."
        result = json.dumps({"city": city, "degrees": degrees, "sky": condition})
        answer = f'In "{city}" it is {degrees} degrees {unit} and {condition}.'
    elif tool == "add":
        a, b = rng.randint(*ADD_RANGE), rng.randint(*ADD_RANGE)
        question = f"Use the tool to add a={a} and b={b}."
        arguments = {"a": a, "b": b}
        reasoning = "The user wants a sum. I call add."
        result = json.dumps({"sum": a + b})
        answer = f"The sum is {a + b}."
    else:
        word, count = rng.choice(WORDS), rng.randint(1, 5)
        short = rng.random() < 0.5
        question = f'Look up the word "{word}", count={count}' + (", short please." if short else ".")
        arguments = {"word": word, "count": count, "short": True} if short else {"word": word, "count": count}
        reasoning = "The user wants a word looked up. I call lookup."
        result = json.dumps({"word": word, "meaning": MEANINGS[word]})
        answer = f'A "{word}" is {MEANINGS[word]}.'
    call = {"id": f"call_{index}", "type": "function", "function": {"name": tool, "arguments": arguments}}
    return question, call, reasoning, result, answer


def demo_row(rng: random.Random, index: int, kind: str | None = None) -> dict:
    """One BeamRow of ``kind`` (drawn when None)."""
    kind = kind or rng.choice(KINDS)
    messages: list[dict] = [{"role": "system", "content": SYSTEM}] if rng.random() < 0.5 else []
    row: dict = {}
    if kind in ("tool", "tool_multi"):
        row["tools"] = TOOLS
        question, call, reasoning, result, answer = _tool_turn(rng, index)
        messages += [{"role": "user", "content": question},
                     {"role": "assistant", "reasoning_content": reasoning, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                      "content": result},
                     {"role": "assistant", "reasoning_content": "The tool answered. I tell the user.",
                      "content": answer}]
    turns = {"chat": 1, "multi": rng.randint(2, 3), "tool": 0, "tool_multi": 1}[kind]
    for _ in range(turns):
        question, reasoning, answer = _question(rng)
        messages += [{"role": "user", "content": question},
                     {"role": "assistant", "reasoning_content": reasoning, "content": answer}]
    row["messages"] = messages
    if rng.random() < 0.85:
        row["chat_template_kwargs"] = {"reasoning_effort": rng.choice(EFFORTS)}
    row["meta"] = {"source": "demo", "row": index, "kind": kind}
    return row


def copied_values() -> list[str]:
    """Every value a tool call copies from its prompt: the cities, the words and the add numbers."""
    return [*CITIES, *WORDS, *(str(n) for n in range(ADD_RANGE[0], ADD_RANGE[1] + 1))]


def _vocabulary() -> list[str]:
    return [*copied_values(), *UNITS, *CONDITIONS]


def tokenizer_corpus(repeats: int = 40) -> tuple[str, ...]:
    """Lines the demo's fixture tokenizer also learns from, so that each copied value is one token
    (``"Cairo"`` as written in the prompts): copying one token from the prompt into the call is what
    a two-layer model learns in a few hundred steps; copying a run of word pieces (``C`` ``air`` ``o``)
    takes an induction mechanism it does not form in that budget (README: What it takes)."""
    return tuple(" ".join([f'"{v}"'] * repeats) for v in _vocabulary())


def first_prompt(row: dict) -> str:
    """The first user message: the held-out key. Stricter than the whole prompt: a held-out row never
    asks a question a training row asked first, whatever its system prompt, tools or effort."""
    return next(m["content"] for m in row["messages"] if m["role"] == "user")


def demo_rows(n: int, *, seed: int = 0) -> Iterator[dict]:
    """``n`` seeded rows, the kinds in turn (so every kind is present in any stretch of rows)."""
    rng = random.Random(seed)
    for index in range(n):
        yield demo_row(rng, index, TRAIN_MIX[index % len(TRAIN_MIX)])


def demo_split(n_train: int, n_eval: int, *, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """Training rows and held-out rows: no held-out row's first prompt appears in the training rows."""
    train = list(demo_rows(n_train, seed=seed))
    seen = {first_prompt(r) for r in train}
    held: list[dict] = []
    rng = random.Random(seed + 1_000_003)
    index = n_train
    while len(held) < n_eval:
        row = demo_row(rng, index, KINDS[len(held) % len(KINDS)])
        index += 1
        key = first_prompt(row)
        if key not in seen:
            seen.add(key)
            held.append(row)
    return train, held
