"""The reasoning checked against its turn without a request (``beam_sft.reason.consistency``): the
class of "names another tool", word forms, several and parallel calls, plain turns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_sft.reason.consistency import check_consistency, names

TOOLS = [{"type": "function", "function": {"name": n}} for n in ("get_weather", "get_time", "search", "add")]


def call(*names_):
    return {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": n, "arguments": {}}}
                                                for n in names_]}


PLAIN = {"role": "assistant", "content": "It is noon."}


@pytest.mark.parametrize("text", [
    "The user wants the time: I use get_time.",
    "I call `get_time` for Lisbon.",
    "I call GET_TIME.",
    "I call Get Time.",
    "I call get-time.",
    "So: get_time({\"city\": \"Lisbon\"}).",
    "I search for it.",  # a tool named by an ordinary word is named whenever the word is used
])
def test_another_declared_tool_and_none_called_is_refused(text):
    problem = check_consistency(text, call("get_weather"), TOOLS)
    assert problem is not None and problem[0] == "teacher_inconsistent", text
    assert "get_weather" in problem[1]


@pytest.mark.parametrize("text", [
    "I answer by looking up the forecast.",  # no tool named at all
    "Not search: get_weather is the one.",  # its own tool named with another
    "I call get weather.",
    "`Get_Weather` it is.",
    "get_weather_v2 and get_time_zone are not declared tools.",  # a name inside a longer identifier
])
def test_fine_for_a_call_turn(text):
    assert check_consistency(text, call("get_weather"), TOOLS) is None, text


V2_TOOLS = [{"type": "function", "function": {"name": n}} for n in ("get_weather", "get_weather_v2")]


@pytest.mark.parametrize("text, refused", [
    ("I will call get_weather_v2.", True),
    ("I will call get-weather-v2.", True),  # joined by "-" into a longer identifier: the other tool
    ("I will call Get Weather V2.", True),  # inside the longer declared name's mention: only that one
    ("I will call get.weather.v2 now.", True),
    ("I will call get_weather.", False),
    ("I will call get-weather, then v2.", False),
    ("Get weather, not get weather v2.", False),  # its own tool named as well
])
def test_a_longer_declared_name_spelt_with_separators(text, refused):
    problem = check_consistency(text, call("get_weather"), V2_TOOLS)
    assert (problem is not None and "get_weather_v2" in problem[1]) == refused, (text, problem)


@pytest.mark.parametrize("text", [
    "We will call get_time next.",
    "I'll call the function get_time.",
    "Let's use the tool `get_time`.",
    "We're going to invoke get time.",
])
def test_plain_turn_announcing_a_call_in_other_words(text):
    problem = check_consistency(text, PLAIN, TOOLS)
    assert problem is not None and "get_time" in problem[1], text


def test_several_and_parallel_calls_one_of_them_named_is_enough():
    turn = call("get_weather", "get_time")
    assert check_consistency("First get_time, then the rest; no search.", turn, TOOLS) is None
    assert check_consistency("I search and add.", turn, TOOLS)[0] == "teacher_inconsistent"
    assert check_consistency("I add the two.", call("add", "add"), TOOLS) is None


def test_no_declared_tools_nothing_to_check():
    assert check_consistency("I call get_time.", call("get_weather"), None) is None
    assert check_consistency("I will call get_time.", PLAIN, []) is None


@pytest.mark.parametrize("text, refused", [
    ("I will call get_time now.", True),
    ("I'll use the `get_time` tool.", True),
    ("Let me call get time.", True),
    ("I need to invoke search first.", True),
    ("get_time returned noon, so I report it.", False),  # a tool used before, named in passing
    ("I called get_time earlier; it said noon.", False),
    ("No tool is needed here.", False),
])
def test_plain_turn_that_announces_a_call(text, refused):
    problem = check_consistency(text, PLAIN, TOOLS)
    assert (problem is not None and problem[0] == "teacher_inconsistent") == refused, text


@pytest.mark.parametrize("blank", [" ", "\n"])
def test_a_long_run_of_blanks_is_checked_in_linear_time(blank):
    """A degenerate reply ("I" then thousands of blanks, within --max-reasoning-chars) against ten
    declared tools: the intent pattern once split the run between two blank-matching parts every way
    (quadratic: 87 s a turn, paid again on every rerun from the cache)."""
    import time

    tools = [{"type": "function", "function": {"name": f"tool_{i}"}} for i in range(10)]
    started = time.monotonic()
    assert check_consistency("I" + blank * 19990 + "x", PLAIN, tools) is None
    assert check_consistency("We" + blank * 19990 + "will call tool_3.", PLAIN, tools)[0] == "teacher_inconsistent"
    assert time.monotonic() - started < 5


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8)


@settings(max_examples=200, deadline=None)
@given(own=_WORD, other=_WORD, sep=st.sampled_from(["_", " ", "-", "", "."]), upper=st.booleans(),
       filler=st.text(alphabet="xyz ,.!", max_size=30))
def test_property_any_spelling_of_the_own_tool_keeps_it(own, other, sep, upper, filler):
    """Whatever spelling of the called tool's two-part name appears, with whatever other tool, the
    reasoning is kept; with only the other tool's spelling it is refused."""
    if own == other or own in other or other in own:
        return
    called, declared_other = f"{own}_do", f"{other}_do"
    tools = [{"function": {"name": called}}, {"function": {"name": declared_other}}]
    spell = lambda n: (n.replace("_", sep).upper() if upper else n.replace("_", sep))  # noqa: E731
    assert names(f"{filler} {spell(called)} {filler}", called)
    assert check_consistency(f"{filler} {spell(declared_other)} and {spell(called)}.", call(called), tools) is None
    problem = check_consistency(f"{filler} I use {spell(declared_other)}.", call(called), tools)
    assert problem is not None and problem[0] == "teacher_inconsistent"
