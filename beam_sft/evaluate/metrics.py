"""Task metrics: one generated assistant turn scored against the reference turn of the data.

``score_turn(generated, reference, tools)`` scores one turn; ``aggregate(scores)`` sums them. Pure (no
torch): the training callback and ``beam-sft eval`` (local or served) use the same functions.

``generated`` is either the raw text a model wrote after the prompt's ``<|start|>assistant`` (local
generation, special tokens kept) or a ``ServedTurn`` (what an OpenAI-compatible server returned, already
parsed). ``reference`` is the trained assistant message of the row (``content``, ``reasoning_content``
or ``thinking``, ``tool_calls``). A turn's *kind* is ``tool`` when the reference calls a tool and
``plain`` otherwise.

Which turns each metric counts (its denominator), and what makes a turn count as right:

* ``format_valid``: every turn. Right when the generation is a valid Beam turn (``format_check``: it
  ends with a stop marker, parses strictly, has reasoning, an answer or calls to declared tools whose
  arguments satisfy their schemas, and no Harmony marker inside its text). Served: the same rules on
  the message the server parsed (raw ``<|start|>assistant to=...`` text in ``content``, which a server
  without Beam's tool parser returns, is not a valid turn), and the server said it stopped
  (``finish_reason`` ``stop`` or ``tool_calls``). A served turn stopped by
  ``length`` is read like a local one cut off before its stop token: unreadable, wrong wherever counted;
  so is one whose ``finish_reason`` disagrees with its calls (``tool_calls`` without a call, ``stop``
  with calls), as its local twin (an answer ending ``<|call|>``) does not parse.
* ``tool_name_accuracy``: turns where the reference calls a tool or the generation does. Right when
  the SET of called function names is the same (how often a name is called does not count here).
* ``argument_exact_match``: turns where the reference calls a tool. Right when the calls are equal as
  a multiset of (name, arguments): every reference call has its own generated call of that name with
  equal arguments and there is no extra call. Each argument is compared as the format carries it:
  written as the chat template writes it, read back as the parser reads it under the tool's schema
  (``read_written``: the declared types in order, as transformers casts them), then in one number form
  (``coerce``). So ``"3"`` equals ``3`` for an integer parameter, ``"true"`` equals ``true`` for a
  boolean, ``3`` equals ``3.0`` for any number, key order does not count, and for a parameter the
  schema gives no type, ``3`` equals ``"3"``: the format writes both as ``3``, and a local generation
  could not say which it meant, so a served one is not held to it either (such a value's text is read
  as the JSON value it spells, so there too ``3.0`` equals ``3`` and an object's key order is free). Arguments that are not a
  JSON object (text a server could not parse, a key twice) equal nothing.
* ``answer_exact_match``: turns where the reference gives a final answer (plain turns). Right when the
  generated final text equals the reference's after whitespace runs become one space, ends are
  stripped and case is folded. A generation that calls a tool instead, or cannot be read, is wrong.
* ``answer_token_f1``: the same turns; the mean of the token F1 of the two texts (tokens: ``\\w+``
  runs of the case-folded text, punctuation dropped; multiset overlap). Numerator is the sum of F1s.
* ``stop_accuracy``: every turn. Right when the generation stops the way the reference does:
  ``<|call|>`` when the reference calls a tool, ``<|return|>`` when it answers. No stop (cut off at the
  token limit) is wrong, and so is a stop marker after text that cannot be read as a turn
  (``<|return|>`` alone): a model that only learned where to stop has not learned the turn.
* ``distinct_ratio``: per kind, distinct generations / turns of that kind (overall: the sum of the
  kinds' distinct counts / all turns). The collapse detector: a model answering every prompt alike
  reads ``1/n``. Generations are compared by their parsed message (reasoning, answer, calls with
  coerced arguments) when they parse, else by their raw text, so local and served runs count alike;
  texts are compared after ``normalize_answer`` (whitespace runs, ends, case), as answers are.

Every metric is a ``Fraction`` with its numerator and denominator; ``value`` is ``None`` when no turn
counts (``0/0``), never a made-up 0 or 1.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from beam_sft.data import jsontext
from beam_sft.evaluate.format_check import Verdict, check_message, tool_schemas
from beam_sft.evaluate.format_check import score_turn as format_verdict
from beam_sft.harmony import markers
from beam_sft.harmony.response import canonical_assistant_message, render_argument_value

METRICS = ("format_valid", "tool_name_accuracy", "argument_exact_match", "answer_exact_match",
           "answer_token_f1", "stop_accuracy", "distinct_ratio")
KINDS = ("tool", "plain")
STOP_RETURN, STOP_CALL = "return", "call"


@dataclass(frozen=True)
class ServedTurn:
    """A turn an OpenAI-compatible server returned: its message already parsed, and how it stopped.

    ``stop``: ``"return"`` (``finish_reason: stop``), ``"call"`` (``tool_calls``), ``None`` (``length``
    or anything else: the turn did not end). ``message``: ``thinking``, ``content`` and ``tool_calls``
    (``function.arguments`` as a dict, or the JSON string a server sends). ``problem``: why the reply
    could not be read as a message at all (``served.served_turn``: a shape no chat completion has); such
    a turn is unreadable, wrong wherever it counts."""

    message: dict
    stop: str | None
    raw: str = ""
    finish_reason: str | None = None
    problem: str | None = None


ParsedOrText = str | ServedTurn  # raw generated text (local) or what a server returned


@dataclass(frozen=True)
class Fraction:
    numerator: float
    denominator: int

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None

    def __add__(self, other: Fraction) -> Fraction:
        return Fraction(self.numerator + other.numerator, self.denominator + other.denominator)

    def as_dict(self) -> dict:
        return {"numerator": self.numerator, "denominator": self.denominator, "value": self.value}


@dataclass(frozen=True)
class TurnScore:
    """One turn's marks: ``None`` where the metric does not count this turn (see the module doc)."""

    kind: str
    format_valid: bool
    format_problem: str | None
    tool_name: bool | None
    arguments: bool | None
    answer_exact: bool | None
    answer_f1: float | None
    stop: bool
    key: str  # what distinct_ratio compares
    message: dict | None  # the generation as read (None: unreadable)


@dataclass(frozen=True)
class TaskMetrics:
    """Every metric overall and per kind, each a ``Fraction``."""

    overall: dict[str, Fraction]
    by_kind: dict[str, dict[str, Fraction]]

    def values(self) -> dict[str, float | None]:
        """``{name: value}`` overall, plus ``name_tool`` / ``name_plain`` for each kind with turns."""
        out: dict[str, float | None] = {name: f.value for name, f in self.overall.items()}
        for kind, metrics in self.by_kind.items():
            if metrics["format_valid"].denominator:
                out.update({f"{name}_{kind}": f.value for name, f in metrics.items()})
        return out

    def counts(self) -> dict[str, dict]:
        """``{name: {numerator, denominator, value}}``, the same keys as ``values``."""
        out = {name: f.as_dict() for name, f in self.overall.items()}
        for kind, metrics in self.by_kind.items():
            if metrics["format_valid"].denominator:
                out.update({f"{name}_{kind}": f.as_dict() for name, f in metrics.items()})
        return out


# ---------------------------------------------------------------------------- coercion


def coerce(value: Any, schema: Any) -> Any:
    """``value`` in the declared schema's types, as far as it can be read so; then numbers in one form.

    Strings the format writes raw are read as the declared type (``"3"`` -> 3 for integer, ``"true"``
    -> True for boolean, ``"null"`` -> None, JSON text for object/array); a non-string for a string
    parameter becomes the text the chat template would write. What cannot be read stays as it is
    (and so differs from a well-typed reference). Whole numbers become ints: 3.0 equals 3.

    >>> coerce("3", {"type": "integer"}), coerce("true", {"type": "boolean"}), coerce(3.0, {})
    (3, True, 3)
    >>> coerce({"b": "2", "a": "x"}, {"type": "object", "properties": {"b": {"type": "number"}}})
    {'b': 2, 'a': 'x'}
    >>> coerce(3, {"type": "string"}), coerce("three", {"type": "integer"})
    ('3', 'three')
    """
    schema = schema if isinstance(schema, dict) else {}
    types = schema.get("type")
    names = [types] if isinstance(types, str) else [t for t in (types or []) if isinstance(t, str)]
    if names:
        value = _as_declared(value, names)
    if isinstance(value, dict):
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {k: coerce(v, properties.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [coerce(v, schema.get("items")) for v in value]
    return _one_number_form(value)


def _as_declared(value: Any, names: list[str]) -> Any:
    if any(_fits(value, name) for name in names):
        return value
    for name in names:  # in declared order: the first type the value can be read as
        read = _read_as(value, name)
        if read is not _UNREAD:
            return read
    return value


_UNREAD = object()


_PLAIN_TYPES: dict[str, type] = {"boolean": bool, "object": dict, "array": list, "null": type(None)}


def _fits(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return name == "number" or float(value).is_integer()
    return name in _PLAIN_TYPES and isinstance(value, _PLAIN_TYPES[name])


def _read_as(value: Any, name: str) -> Any:
    if name == "string":
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)  # what the chat template writes for a non-string
    if not isinstance(value, str):
        return _UNREAD
    text = value.strip()
    if name in ("integer", "number"):
        try:
            number = json.loads(text)
        except ValueError:
            return _UNREAD
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return _UNREAD
        if name == "integer" and not float(number).is_integer():
            return _UNREAD
        return number
    if name == "boolean":
        return {"true": True, "false": False}.get(text.lower(), _UNREAD)
    if name == "null":
        return None if text.lower() in ("null", "none", "") else _UNREAD
    if name in ("object", "array"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return _UNREAD
        return parsed if isinstance(parsed, dict if name == "object" else list) else _UNREAD
    return _UNREAD


def _one_number_form(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def schema_types(schema: Any) -> tuple[str, ...]:
    """The types a parameter's schema declares, in the order a reader tries them: ``type`` (a name or a
    list), the ``anyOf``/``oneOf`` choices' types, then ``null`` where ``nullable`` says so.

    >>> schema_types({"anyOf": [{"type": "integer"}, {"type": ["string", "null"]}]}), schema_types({})
    (('integer', 'string', 'null'), ())
    """
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else [t for t in declared if isinstance(t, str)] \
        if isinstance(declared, list) else []
    for union in ("anyOf", "oneOf"):
        choices = schema.get(union)
        for choice in choices if isinstance(choices, list) else []:
            types.extend(schema_types(choice))
    if schema.get("nullable") and "null" not in types:
        types.append("null")
    return tuple(types)


def read_written(raw: str, types: Sequence[str]) -> Any:
    """A written argument value as the parser gives it back under a schema's ``types``: the first type
    it casts to, in order, else the text itself (no type, ``string``, an unknown type, failed casts;
    ``string`` casts nothing, so ``["string", "integer"]`` reads ``3`` as the integer).
    These are the casts transformers' response parser applies (``parse_response(..., tools=...)``), which
    the local path reads generations with; ``tests/evaluate/test_metrics.py`` proves them equal on
    values written and parsed through the template.

    >>> read_written("3", ("integer",)), read_written("3.0", ("integer",)), read_written("x", ("string", "integer"))
    (3, 3, 'x')
    >>> read_written("1", ("boolean",)), read_written("None", ("null",)), read_written("[1]", ("object",))
    (True, None, '[1]')
    """
    for name in types:
        try:
            if name == "integer":
                try:
                    return int(raw)
                except ValueError:
                    number = float(raw)  # a whole number written as a float, "3.0"
                    if number.is_integer():
                        return int(number)
                    continue
            if name == "number":
                number = float(raw)
                if number != number or number in (float("inf"), float("-inf")):
                    continue
                return int(number) if number.is_integer() and "." not in raw else number
            if name == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if name == "null" and raw.strip() in ("null", "None"):
                return None
            if name in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if name == "object" else list):
                    return decoded
        except (ValueError, OverflowError):
            continue
    return raw


def canonical_arguments(arguments: Any, schema: Any) -> str:
    """One call's arguments as JSON text in the form the format carries them (the module doc), keys
    sorted: equal text <=> equal arguments.

    >>> canonical_arguments({"b": "3", "a": 1.0}, {"properties": {"b": {"type": "integer"}, "a": {"type": "number"}}})
    '{"a": 1, "b": 3}'
    >>> canonical_arguments({"n": 3}, {"properties": {"n": {}}}) == canonical_arguments({"n": "3"}, {})
    True
    >>> canonical_arguments('{"a": 1, "a": 2}', {}).startswith('{"<unreadable arguments>"')  # a key twice
    True
    """
    read = arguments
    if isinstance(arguments, str):  # a server's arguments string, read by the one JSON rule (no key twice)
        try:
            read = jsontext.loads(arguments)
        except ValueError:
            pass
    if not isinstance(read, dict):
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=repr)
        return json.dumps({"<unreadable arguments>": text}, ensure_ascii=False)
    arguments = read
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    out = {}
    for key, value in arguments.items():
        prop = properties.get(key)
        types = schema_types(prop)
        read = read_written(render_argument_value(value), types)
        if not types and isinstance(read, str):
            # No declared type: the text the format carries, read as the JSON value it writes (an object
            # whatever its key order, 3.0 as 3); text that is no JSON value, or a JSON string, stays text.
            try:
                decoded = json.loads(read)
            except ValueError:
                decoded = read
            read = read if isinstance(decoded, str) else decoded
        out[key] = coerce(read, prop)
    return json.dumps(_nfc(out), sort_keys=True, ensure_ascii=False)


def _nfc(value: Any) -> Any:
    """Every text of an argument value in Unicode NFC: ``"Zu\u0308rich"`` and ``"Z\u00fcrich"`` are one
    city (a model's tokenizer may write either)."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, dict):
        return {unicodedata.normalize("NFC", k): _nfc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nfc(v) for v in value]
    return value


# ---------------------------------------------------------------------------- text


def normalize_answer(text: str) -> str:
    """Unicode NFC (``café`` composed or with a combining accent is one text), whitespace runs -> one
    space, ends stripped, case folded.

    >>> normalize_answer("  The   answer\\nis 42. "), normalize_answer("Cafe\\u0301") == normalize_answer("caf\\u00e9")
    ('the answer is 42.', True)
    """
    return " ".join(unicodedata.normalize("NFC", text).split()).casefold()


def token_f1(generated: str, reference: str) -> float:
    """Token F1 of two texts (``\\w+`` runs of the case-folded text, multiset overlap); two empty texts: 1.

    >>> round(token_f1("Paris is sunny", "It is sunny in Paris"), 6), token_f1("", "x")
    (0.75, 0.0)
    """
    gen, ref = (re.findall(r"\w+", unicodedata.normalize("NFC", text).casefold()) for text in (generated, reference))
    if not gen and not ref:
        return 1.0
    common = sum((Counter(gen) & Counter(ref)).values())
    if not common:
        return 0.0
    precision, recall = common / len(gen), common / len(ref)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------------------- one turn


@dataclass(frozen=True)
class _Reading:
    verdict: Verdict
    message: dict | None
    stop: str | None
    raw: str


def _stop_of_text(text: str) -> str | None:
    stops = sorted((i, m) for m in markers.STOP_MARKERS if (i := text.find(m)) >= 0)
    if not stops:
        return None
    return STOP_RETURN if stops[0][1] == markers.RETURN else STOP_CALL


def _served_message(message: dict) -> dict:
    """A server's message (``served.served_turn`` has checked its shape) in the parsed normal form
    (``thinking``; ``tool_calls`` or ``content``). Arguments a server sent as text are read by the one
    JSON rule; text that is not a JSON object stays text, which no schema accepts."""
    thinking = message.get("thinking") or message.get("reasoning_content") or message.get("reasoning") or ""
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, dict) else {}
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = jsontext.loads(args) if args.strip() else {}
            except ValueError:
                pass  # kept as text: the format check then says why it is wrong
        calls.append({"type": "function", "function": {"name": fn.get("name"), "arguments": args}})
    out: dict[str, Any] = {"role": "assistant", "thinking": thinking}
    if calls:
        out["tool_calls"] = calls
    else:
        out["content"] = message.get("content") or ""
    return out


def _read(generated: ParsedOrText, tools: Sequence[dict] | None) -> _Reading:
    if isinstance(generated, ServedTurn):
        raw = generated.raw or json.dumps(generated.message, sort_keys=True, ensure_ascii=False, default=repr)
        if generated.problem is not None:
            return _Reading(Verdict(False, generated.problem), None, None, raw)
        if generated.stop is None:
            # Read as local generation reads a turn cut off before its stop token: not a turn at all, so
            # its partial answer or calls are not scored as if the model had finished them.
            finish = generated.finish_reason if isinstance(generated.finish_reason, str) else "null"
            return _Reading(Verdict(False, f"the turn does not end (finish_reason: {finish})"), None, None, raw)
        message = _served_message(generated.message)
        if (generated.stop == STOP_CALL) != bool(message.get("tool_calls")):
            # A reply that says it stopped to call but calls nothing (or calls, said stopped): the local
            # twin (an answer ending <|call|>, a call ending <|return|>) does not parse, so this is not a
            # turn either: wrong wherever it counts, its stop included, its answer or calls not scored.
            return _Reading(Verdict(False, f"stopped with {generated.stop} but "
                                           f"{'calls' if message.get('tool_calls') else 'calls no'} tool"),
                            None, None, raw)
        return _Reading(check_message(message, tools), message, generated.stop, raw)
    verdict = format_verdict(generated, tools)
    return _Reading(verdict, verdict.message, _stop_of_text(generated), generated)


def _calls(message: dict | None, schemas: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for call in (message or {}).get("tool_calls") or []:
        fn = call.get("function", call) if isinstance(call, dict) else {}
        fn = fn if isinstance(fn, dict) else {}
        name = fn.get("name") if isinstance(fn.get("name"), str) else json.dumps(fn.get("name"), default=repr)
        args = fn.get("arguments")
        args = {} if args is None or (isinstance(args, str) and not args.strip()) else args
        out.append((name, canonical_arguments(args, schemas.get(name))))
    return out


def _key(reading: _Reading, schemas: dict[str, Any]) -> str:
    # Texts compared as answer_exact_match compares them (whitespace runs, case): a model writing one
    # answer to every prompt, once with a trailing newline and once capitalised, has still collapsed.
    message = reading.message
    if message is None:
        return "text:" + normalize_answer(reading.raw)
    return json.dumps({"thinking": normalize_answer(message.get("thinking") or ""),
                       "content": normalize_answer(message.get("content") or ""),
                       "calls": _calls(message, schemas), "stop": reading.stop}, sort_keys=True, ensure_ascii=False)


def kind_of(reference: dict) -> str:
    """``tool`` when the reference turn calls a tool, else ``plain``."""
    return "tool" if reference.get("tool_calls") else "plain"


def score_turn(generated: ParsedOrText, reference: dict, tools: Sequence[dict] | None = None) -> TurnScore:
    """Score one generated turn against its reference (which turns each metric counts: the module doc).

    >>> ref = {"role": "assistant", "reasoning_content": "Add.", "tool_calls": [
    ...     {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]}
    >>> tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    ...     "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]
    >>> s = score_turn("<|channel|>analysis<|message|>Sum.<|end|><|start|>assistant to=add<|channel|>analysis "
    ...     '<|constrain|>xml<|message|><rfl:parameter name="a">\\n2\\n</rfl:parameter>\\n'
    ...     '<rfl:parameter name="b">\\n3\\n</rfl:parameter><|call|>', ref, tools)
    >>> (s.kind, s.format_valid, s.tool_name, s.arguments, s.answer_exact, s.stop)
    ('tool', True, True, True, None, True)
    """
    tools = list(tools) if tools else None
    schemas = tool_schemas(tools)
    ref = canonical_assistant_message(reference)
    kind = kind_of(reference)
    reading = _read(generated, tools)
    message = reading.message
    gen_calls, ref_calls = _calls(message, schemas), _calls(ref, schemas)

    tool_name = None
    if ref_calls or gen_calls:
        tool_name = {n for n, _ in gen_calls} == {n for n, _ in ref_calls}
    arguments = Counter(gen_calls) == Counter(ref_calls) if ref_calls else None
    answer_exact = answer_f1 = None
    if not ref_calls:
        answer = (message or {}).get("content") if message is not None and not gen_calls else None
        if answer is None:
            answer_exact, answer_f1 = False, 0.0
        else:
            answer_exact = normalize_answer(answer) == normalize_answer(ref.get("content") or "")
            answer_f1 = token_f1(answer, ref.get("content") or "")
    want_stop = STOP_CALL if ref_calls else STOP_RETURN
    return TurnScore(kind=kind, format_valid=reading.verdict.valid, format_problem=reading.verdict.problem,
                     tool_name=tool_name, arguments=arguments, answer_exact=answer_exact, answer_f1=answer_f1,
                     stop=message is not None and reading.stop == want_stop, key=_key(reading, schemas),
                     message=message)


# ---------------------------------------------------------------------------- many turns


def _sum(scores: Sequence[TurnScore]) -> dict[str, Fraction]:
    def frac(marks: Iterable[bool | float | None]) -> Fraction:
        counted = [float(m) for m in marks if m is not None]
        return Fraction(sum(counted), len(counted))

    return {
        "format_valid": frac(s.format_valid for s in scores),
        "tool_name_accuracy": frac(s.tool_name for s in scores),
        "argument_exact_match": frac(s.arguments for s in scores),
        "answer_exact_match": frac(s.answer_exact for s in scores),
        "answer_token_f1": frac(s.answer_f1 for s in scores),
        "stop_accuracy": frac(s.stop for s in scores),
        "distinct_ratio": Fraction(len({s.key for s in scores}), len(scores)),
    }


def aggregate(scores: Iterable[TurnScore]) -> TaskMetrics:
    """Every metric overall and per kind (``tool``, ``plain``); ``distinct_ratio`` overall sums the kinds'.

    >>> aggregate([]).values()["format_valid"] is None
    True
    """
    scores = list(scores)
    by_kind = {kind: _sum([s for s in scores if s.kind == kind]) for kind in KINDS}
    overall = _sum(scores)
    distinct = sum(by_kind[k]["distinct_ratio"].numerator for k in KINDS)
    overall["distinct_ratio"] = Fraction(distinct, len(scores))
    return TaskMetrics(overall=overall, by_kind=by_kind)
