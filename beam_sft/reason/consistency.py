"""A teacher's reasoning checked against the turn it is for, without another request.

A reasoning for a tool-call turn that names a declared tool other than the ones the turn calls, and
none of those, argues for another call: it is refused ``teacher_inconsistent``. A reasoning for a
plain answer that says it is about to call a declared tool ("I will call get_weather") argues for a
call the turn does not make: refused too. What this check cannot see is said in the README (a
reasoning that names the right tool may still argue for other arguments; ``--judge`` asks a model).

How a tool counts as *named*: its declared name as a word, case-insensitive, with ``_``, ``-``,
``.`` and spaces between its parts interchangeable (``get_weather``, ``Get Weather``,
```get-weather```, ``getweather``); a name inside a longer identifier (``get_weather_v2``,
``get-weather-v2``: joined by ``_``, or by ``-``/``.`` straight into more letters) is not that tool,
and where a longer declared name holds a shorter one, its mention names only the longer tool
(``Get Weather V2`` names ``get_weather_v2``, not ``get_weather``). A tool whose name is an ordinary word (``add``, ``search``) is therefore named whenever
the word is used: a turn calling ``multiply`` whose reasoning says "I add them" and never
"multiply" is refused, which is what it should be.

Fine: tools declared but not named at all; the turn's own tools named with others ("not search but
get_weather"); several or parallel calls where the reasoning names at least one of them; a plain
answer that mentions a tool it used earlier ("get_weather returned 21 C").

>>> tools = [{"type": "function", "function": {"name": "get_weather"}}, {"type": "function", "function": {"name": "get_time"}}]
>>> call = {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": {}}}]}
>>> check_consistency("I call `get_weather` for Lisbon.", call, tools)
>>> check_consistency("The user wants the time, so I use get time.", call, tools)[0]
'teacher_inconsistent'
>>> check_consistency("I answer from memory.", call, tools)
>>> check_consistency("I will call get_time first.", {"role": "assistant", "content": "Noon."}, tools)[0]
'teacher_inconsistent'
>>> check_consistency("get_time said noon, so I say so.", {"role": "assistant", "content": "Noon."}, tools)
"""

from __future__ import annotations

import functools
import re
from typing import Any

from beam_sft.visible import quoted

_SEPARATORS = re.compile(r"[\s_\-.]+")
# A stated intent to call: "I will call X", "let me use the X tool", "I'll invoke `X`", "I need to run X".
# (No "\s*" straight before a "\s+": on a long run of blanks the two split it every way, quadratic.)
_INTENT = (r"(?:\b(?:i|we)(?:\s*(?:'ll|\u2019ll|'m\s+going\s+to|\u2019m\s+going\s+to|'re\s+going\s+to"
           r"|\u2019re\s+going\s+to)|\s+(?:will|shall|should|need\s+to|must|am\s+going\s+to|are\s+going\s+to"
           r"|have\s+to|now))|\blet\s+me|\blet's|\blet\u2019s)\s+(?:now\s+|first\s+|then\s+)?"
           r"(?:call|use|invoke|run|query|make\s+a\s+call\s+to)\s+(?:the\s+)?(?:(?:function|tool)\s+)?(?:[`'\"*]+)?")


def declared_names(tools: Any) -> list[str]:
    """The function names a row declares (``{"type": "function", "function": {"name"}}`` or ``{"name"}``).

    >>> declared_names([{"function": {"name": "a"}}, {"name": "b"}, "junk", {"function": {}}])
    ['a', 'b']
    """
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if isinstance(fn.get("name"), str) and fn["name"].strip():
            names.append(fn["name"])
    return names


def called_names(message: dict) -> list[str]:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    names = []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


@functools.lru_cache(maxsize=1024)
def _name_pattern(name: str) -> str:
    parts = [re.escape(p) for p in _SEPARATORS.split(name.strip().lower()) if p]
    # Not inside a longer identifier: no letter, digit or "_" beside it, nor a "-" or "." that joins it
    # straight to more of them ("get-weather-v2"); a "." or "-" before a blank ends a sentence or a clause.
    return r"(?<![a-z0-9_])(?<![a-z0-9][\-.])" + r"[\s_\-.]*".join(parts) + r"(?![a-z0-9_]|[\-.][a-z0-9])"


def _spans(pattern: str, lower: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, lower)] if _SEPARATORS.sub("", pattern) else []


def names(text: str, name: str) -> bool:
    """Whether ``text`` names the tool ``name`` (the module docstring's rule), taken alone.

    >>> names("then Get-Weather it is", "get_weather"), names("get_weather_v2", "get_weather")
    (True, False)
    >>> names("I call get-weather-v2.", "get_weather"), names("I call get-weather.", "get_weather")
    (False, True)
    """
    return bool(named_tools(text, [name]))


def named_tools(text: str, candidates: list[str], intent: bool = False) -> list[str]:
    """The names of ``candidates`` that ``text`` names (after an intent to call, with ``intent``), in
    ``candidates``' order. A mention that lies inside a longer candidate's mention is that one's only.

    >>> named_tools("I call Get Weather V2.", ["get_weather", "get_weather_v2"])
    ['get_weather_v2']
    >>> named_tools("get weather, then get weather v2", ["get_weather", "get_weather_v2"])
    ['get_weather', 'get_weather_v2']
    """
    lower = text.lower()
    prefix = _INTENT if intent else ""
    found = {n: _spans(prefix + _name_pattern(n), lower) for n in dict.fromkeys(candidates)}
    if intent:  # an intent's span starts at "I will ...": compare where the names themselves stand
        found = {n: [(e - len(m.group(1)), e) for m in re.finditer(prefix + "(" + _name_pattern(n) + ")", lower)
                     for e in [m.end()]] if spans else [] for n, spans in found.items()}
    out = []
    for name, spans in found.items():
        if any(not any(other != name and a <= start and end <= b and b - a > end - start
                       for other, others in found.items() for a, b in others)
               for start, end in spans):
            out.append(name)
    return out


def announces_call(text: str, name: str) -> bool:
    """Whether ``text`` says it is about to call ``name``."""
    return bool(named_tools(text, [name], intent=True))


_NOT_WORDS = re.compile(r"[\W_]+")


def restates_answer(text: str, message: dict) -> bool:
    """Whether a reasoning says nothing but the turn's answer: the same words, whatever the case,
    spacing and punctuation ("4." for the answer "4"). Such a text trains the answer twice and no
    reasoning, however the other checks find it.

    >>> restates_answer("The answer: 4.", {"content": "the answer 4"}), restates_answer("2 + 2 = 4", {"content": "4"})
    (True, False)
    """
    answer = message.get("content")
    if not isinstance(answer, str):
        return False
    words = _NOT_WORDS.sub(" ", answer.casefold()).strip()
    return bool(words) and _NOT_WORDS.sub(" ", text.casefold()).strip() == words


def check_consistency(text: str, message: dict, tools: Any) -> tuple[str, str] | None:
    """``None`` (consistent as far as this check sees), ``("teacher_restates_answer", message)`` or
    ``("teacher_inconsistent", message)``."""
    if not called_names(message) and restates_answer(text, message):
        return ("teacher_restates_answer", "the reasoning only restates the turn's answer "
                f"({len(text.strip())} characters): no reasoning to train")
    declared = declared_names(tools)
    if not declared:
        return None
    called = called_names(message)
    if called:
        named = named_tools(text, declared + called)
        if any(n in named for n in called):
            return None
        others = [n for n in named if n not in called]
        if others:
            return ("teacher_inconsistent", f"the reasoning names the tool {quoted(others[0])} but the turn calls "
                    f"{', '.join(quoted(n) for n in list(dict.fromkeys(called))[:12])}")
        return None
    announced = next(iter(named_tools(text, declared, intent=True)), None)
    if announced is not None:
        return ("teacher_inconsistent", f"the reasoning says it will call {quoted(announced)} but the turn answers "
                "without a tool call")
    return None
