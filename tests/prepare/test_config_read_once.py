"""``prepare`` reads its config once: followed from ``prepare()`` through a real run (the teacher
pass against a stub teacher on 127.0.0.1, then a second run that is a cache hit), the
``PrepareConfig`` object (by identity, or held by an argument: the resolved plan, a job) reaches
few modules, and none of ``beam_sft.reason``: the teacher pass gets the resolved plan's teacher.

The run is traced with ``sys.settrace`` (and ``threading.settrace``: the teacher pass asks from
a thread pool); a module counts when one of its functions is called with the config among its
arguments (or held by one), or returns with it among its locals. A re-entry is the config coming
back to a module it had left. Traced this way, before the plan held the values the config entered
5 modules (pipeline, resolved, cache, records, config) and came back 8 times; now 3 and 5 (over
the two runs: each enters pipeline, resolve and the config's own ``resolved_num_proc``).
"""

from __future__ import annotations

import dataclasses
import sys
import threading

from beam_sft.prepare import PrepareConfig, SourceSpec, prepare
from beam_sft.reason.config import TeacherConfig
from tests.reason.stub_server import StubServer
from tests.reason.test_reason import write_rows

MAX_MODULES = 14  # half the 28 modules the config entered when this was first measured (by name, all paths)
MAX_REENTRIES = 7  # half the 14 re-entries of that measurement
# The modules that may hold the whole config: the one that reads it (``prepare``), the one that
# interprets it once (``resolve``), and the config's own (its methods).
READERS = {"beam_sft.prepare.pipeline", "beam_sft.prepare.resolved", "beam_sft.prepare.config"}

_ATOMS = (str, bytes, int, float, bool, type(None), type)


def holds(value, target, depth: int = 2) -> bool:
    """Whether ``value`` is ``target`` or holds it within ``depth`` steps (a field, an item)."""
    if value is target:
        return True
    if depth == 0 or isinstance(value, _ATOMS):
        return False
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:16]
    elif isinstance(value, dict):
        items = list(value.values())[:16]
    elif dataclasses.is_dataclass(value):
        items = [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    else:
        items = list(getattr(value, "__dict__", {}).values())
    return any(holds(item, target, depth - 1) for item in items)


def trace_config(run, config) -> list[tuple[str, str]]:
    """``(module, function)`` each time the config enters a beam_sft module it was not in just before."""
    entries: list[tuple[str, str]] = []
    lock = threading.Lock()

    def seen(frame, event) -> None:
        # a call's locals are its arguments (held within two steps: the plan, a job); a return's
        # locals add what the function took out of them (``config = plan.config``)
        depth = 2 if event == "call" else 0
        if any(holds(v, config, depth) for v in list(frame.f_locals.values())):
            module = frame.f_globals["__name__"]
            with lock:
                if not entries or entries[-1][0] != module:
                    entries.append((module, frame.f_code.co_name))

    def on_return(frame, event, arg):
        if event == "return":
            seen(frame, event)
        return on_return

    def on_call(frame, event, arg):
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("beam_sft."):
            return None  # no local tracing of other libraries' frames
        if frame.f_code.co_name == "<module>":
            return None  # an import: the module's globals are not a call's arguments
        seen(frame, event)
        frame.f_trace_lines = False  # only its return event
        return on_return

    # settrace, not setprofile: the tracer is not called for every C call of every library
    threading.settrace(on_call)
    sys.settrace(on_call)
    try:
        run()
    finally:
        sys.settrace(None)
        threading.settrace(None)
    return entries


def test_the_config_reaches_few_modules_and_no_reason_module(tmp_path, fixture_dir):
    src = write_rows(tmp_path / "rows.jsonl")
    with StubServer() as stub:
        teacher = TeacherConfig(base_url=stub.base_url, model="t", cache_dir=str(tmp_path / "cache"))
        config = PrepareConfig(sources=[SourceSpec(path=str(src))], tokenizer=str(fixture_dir),
                               output=str(tmp_path / "out"), num_proc=1, missing_reasoning="unmask",
                               reasoning=teacher)

        def run():
            prepare(config)
            prepare(config)  # the cache hit

        entries = trace_config(run, config)
        assert len(stub.requests) == 3  # the teacher pass ran (and the second run asked nothing)
    modules = list(dict.fromkeys(module for module, _ in entries))
    reentries = len(entries) - len(modules)
    shown = "\n".join(f"  {module}: {[f for m, f in entries if m == module]}" for module in modules)
    assert len(modules) <= MAX_MODULES, f"the config enters {len(modules)} modules:\n{shown}"
    assert reentries <= MAX_REENTRIES, f"the config comes back {reentries} times:\n{shown}"
    assert not [m for m in modules if m.startswith("beam_sft.reason")], f"a reason module gets the config:\n{shown}"
    assert set(modules) <= READERS, f"past the plan, the config reaches:\n{shown}"


def test_the_trace_sees_a_module_that_gets_the_config(fixture_dir):
    """The tracer itself: a call that passes the config on (here, into ``resolve``) is seen."""
    from beam_sft.prepare.resolved import resolve

    config = PrepareConfig(sources=[], tokenizer=str(fixture_dir))
    entries = trace_config(lambda: resolve(config), config)
    assert entries[0] == ("beam_sft.prepare.resolved", "resolve")
    assert holds({"a": [config]}, config) and not holds({"a": [[[config]]]}, config)
