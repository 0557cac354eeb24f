"""A teacher's reasoning checked against the turn it is for, without another request.

A reasoning for a tool-call turn that names a declared tool other than the ones the turn calls, and
none of those, argues for another call: it is refused ``teacher_inconsistent``. A reasoning for a
plain answer that says it is about to call a declared tool ("I will call get_weather") argues for a
call the turn does not make: refused too. What this check cannot see is said in the README (a
reasoning that names the right tool may still argue for other arguments; ``--judge`` asks a model).

How a tool counts as *named*: its declared name as a word, case-insensitive, with ``_``, ``-``,
``.`` and spaces between its parts interchangeable (``get_weather``, ``Get Weather``,
```get-weather```, ``getweather``); a name inside a longer identifier (``get_weather_v2``) is not
that tool. A tool whose name is an ordinary word (``add``, ``search``) is therefore named whenever
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

_SEPARATORS = re.compile(r"[\s_\-.]+")
# A stated intent to call: "I will call X", "let me use the X tool", "I'll invoke `X`", "I need to run X".
_INTENT = (r"(?:\bi\s*(?:'ll|\u2019ll|\s+will|\s+shall|\s+should|\s+need\s+to|\s+must|\s+am\s+going\s+to|'m\s+going\s+to"
           r"|\u2019m\s+going\s+to|\s+have\s+to)|\blet\s+me|\bi\s+now)\s+(?:now\s+|first\s+|then\s+)?"
           r"(?:call|use|invoke|run|query|make\s+a\s+call\s+to)\s+(?:the\s+)?(?:[`'\"*]+)?")


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
    return r"(?<![a-z0-9_])" + r"[\s_\-.]*".join(parts) + r"(?![a-z0-9_])"


def names(text: str, name: str) -> bool:
    """Whether ``text`` names the tool ``name`` (the module docstring's rule).

    >>> names("then Get-Weather it is", "get_weather"), names("get_weather_v2", "get_weather")
    (True, False)
    """
    pattern = _name_pattern(name)
    return pattern != r"(?<![a-z0-9_])(?![a-z0-9_])" and re.search(pattern, text.lower()) is not None


def announces_call(text: str, name: str) -> bool:
    """Whether ``text`` says it is about to call ``name``."""
    return re.search(_INTENT + _name_pattern(name), text.lower()) is not None


def check_consistency(text: str, message: dict, tools: Any) -> tuple[str, str] | None:
    """``None`` (consistent as far as this check sees) or ``("teacher_inconsistent", message)``."""
    declared = declared_names(tools)
    if not declared:
        return None
    called = called_names(message)
    if called:
        if any(names(text, n) for n in called):
            return None
        others = [n for n in declared if n not in called and names(text, n)]
        if others:
            return ("teacher_inconsistent", f"the reasoning names the tool {others[0]!r} but the turn calls "
                    f"{', '.join(repr(n) for n in dict.fromkeys(called))}")
        return None
    announced = next((n for n in declared if announces_call(text, n)), None)
    if announced is not None:
        return ("teacher_inconsistent", f"the reasoning says it will call {announced!r} but the turn answers "
                "without a tool call")
    return None
