"""The model card (``README.md``) of a trained, merged or exported folder: what this run trained.

TRL's default card knows nothing of the run ("a fine-tuned version of None", a quick start that
never renders the chat template). This one is built only from records the run left behind, so it
says nothing that is not true of it:

* ``beam_run.json`` (``train/save.py``): the recipe (and its digest), the prepared folder, world size
  and distribution, LoRA or full, checkpoint format, the step reached;
* ``metrics.jsonl`` and ``format_health.jsonl`` (``train/run_log.py``, ``train/format_health.py``):
  eval loss and format health by step; ``losses.jsonl``: training loss and tokens seen;
* the data as the run recorded it when it started (``beam_run.json``'s ``prepared_data``, from
  ``train/provenance.py``): sources, rows kept and rejected by reason code, tokens and trained tokens,
  and the report's own SHA-256. Never the prepared folder's current ``report.json``: after a re-prepare
  it describes data the model never saw (the card then says the folder changed);
* the weights' safetensors headers: parameter count; ``config.json``: the architecture.

``card_facts(folder)`` gathers them (pure reading, no model load), ``render_card(facts)`` writes the
Markdown with hub front matter (``base_model`` and ``datasets`` only where they are hub ids, as JSON
strings, which YAML reads as quoted scalars), and ``write_model_card(folder)`` replaces whatever card is
there. Every text that comes from data, records or paths goes through ``md_text`` (Markdown text) or
``md_code`` (a code span), so a folder name holding a newline, ``# ...``, ``---``, ``<img onerror>`` or
a backtick stays one line of inert text: no heading, no raw HTML, no broken code span. A merged or exported folder gets the
card of the run it came from plus a line saying how it was made (``derived=``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from beam_sft.dataset_folder.layout import REPORT_FILE
from beam_sft.errors import BeamError
from beam_sft.evaluate.metrics import KINDS, METRICS
from beam_sft.train.provenance import data_summary

CARD_FILE = "README.md"
RUN_FILE = "beam_run.json"  # beam_sft.train.save.RUN_FILE (not imported: save pulls in torch)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def recipe_digest(recipe: dict) -> str:
    """SHA-256 of the recipe as the run record holds it, as canonical JSON (sorted keys, no spaces).

    >>> recipe_digest({"b": 1, "a": [2]}) == recipe_digest({"a": [2], "b": 1})
    True
    """
    text = json.dumps(recipe, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def launcher_of(environ: dict[str, str] | None = None) -> str:
    """How this process was started, from what each launcher puts in the environment.

    >>> launcher_of({"ACCELERATE_USE_CPU": "true", "LOCAL_RANK": "0"}), launcher_of({"TORCHELASTIC_RUN_ID": "x"})
    ('accelerate launch', 'torchrun')
    >>> launcher_of({"SLURM_PROCID": "0"}), launcher_of({})
    ('srun', 'python (one process)')
    """
    env = os.environ if environ is None else environ
    if any(k.startswith("ACCELERATE_") for k in env):
        return "accelerate launch"
    if "TORCHELASTIC_RUN_ID" in env:
        return "torchrun"
    if "SLURM_PROCID" in env:
        return "srun"
    if "LOCAL_RANK" in env or "RANK" in env:
        return "a torch.distributed launcher"
    return "python (one process)"


# Persistent buffers a checkpoint stores beside its parameters: not parameters (Beam's and DeepSeek-V3's
# router correction bias, one value per expert per layer: 12,544 on the released Beam).
BUFFER_NAMES = ("e_score_correction_bias",)


def parameter_count(folder: Path) -> int | None:
    """Parameters in the folder's safetensors files, from their headers (no tensor is read); the
    buffers of ``BUFFER_NAMES`` are not counted."""
    total, found = 0, False
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with path.open("rb") as fh:
                size = struct.unpack("<Q", fh.read(8))[0]
                header = json.loads(fh.read(size))
        except (OSError, ValueError, struct.error):
            return None
        for name, entry in header.items():
            if name == "__metadata__" or not isinstance(entry, dict) or name.endswith(BUFFER_NAMES):
                continue
            n = 1
            for d in entry.get("shape", []):
                n *= int(d)
            total += n
            found = True
    return total if found else None


def hub_dataset_ids(sources: list[dict]) -> list[str]:
    """The hub ids among a report's configured sources (local files and folders are not hub datasets)."""
    from beam_sft.data.hub import DatasetRef, dataset_source

    out = []
    for spec in sources:
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
            continue
        fields = {k: spec.get(k) for k in ("path", "name", "split", "revision", "data_files")}
        try:
            ref = dataset_source(SimpleNamespace(**fields))
        except BeamError:
            continue
        if isinstance(ref, DatasetRef) and not ref.is_local and ref.path not in out:
            out.append(ref.path)
    return out


def _is_hub_model(path: str) -> bool:
    from beam_sft.data.hub import looks_like_hub_id

    return not os.path.exists(path) and looks_like_hub_id(path)


# ---------------------------------------------------------------------------- facts


def recorded_data(run: dict, prepared: Path) -> dict[str, Any]:
    """The data the run saw: its record's ``prepared_data`` (taken when it started), and whether the
    prepared folder still holds it (its report.json's SHA-256 now against the recorded one).

    A record from before the counts were recorded has the digest only: the folder's report is used
    while its digest is the recorded one, else no counts are stated. A record with no data
    provenance at all (an older beam-sft) falls back to the folder as it is, and says so."""
    now = file_sha256(prepared / REPORT_FILE) if run.get("prepared") else None
    recorded = run.get("prepared_data")
    if isinstance(recorded, dict):
        summary = recorded.get("summary")
        if not isinstance(summary, dict):
            current = _read_json(prepared / REPORT_FILE) if now is not None and now == recorded.get("report_sha256") else None
            summary = data_summary(current) if isinstance(current, dict) else {}
        return {"recorded": True, "summary": summary, "report_sha256": recorded.get("report_sha256"),
                "fingerprint": recorded.get("fingerprint"), "report_sha256_now": now,
                "changed": now != recorded.get("report_sha256")}
    current = _read_json(prepared / REPORT_FILE) if now is not None else None
    current = current if isinstance(current, dict) else {}
    return {"recorded": False, "summary": data_summary(current), "report_sha256": now,
            "fingerprint": current.get("fingerprint"), "report_sha256_now": now, "changed": False}


def card_facts(folder: str | Path, *, run_folder: str | Path | None = None, derived: str | None = None,
               launcher: str | None = None) -> dict[str, Any]:
    """Everything the card states, read from ``run_folder`` (default: ``folder``) and its records.

    ``derived``: how ``folder`` was made from the run's output (merged, exported), or None.
    """
    folder = Path(folder)
    run_dir = Path(run_folder) if run_folder is not None else folder
    run = _read_json(run_dir / RUN_FILE)
    if run is None and run_dir.name.startswith("checkpoint-"):
        run = _read_json(run_dir.parent / RUN_FILE)
    if not isinstance(run, dict):

        raise BeamError(f"{run_dir}: no {RUN_FILE}: not the output of `beam-sft train`, no card to write")
    records = run_dir if (run_dir / "metrics.jsonl").is_file() else run_dir.parent
    step = int(run.get("global_step") or 0)
    if run_dir.name.startswith("checkpoint-") and run_dir.name[11:].isdigit():
        step = int(run_dir.name[11:])  # an exported checkpoint is what the run was at that step
    recipe = run.get("recipe") or {}
    evals = [r for r in _read_jsonl(records / "metrics.jsonl") if "eval_loss" in r and r.get("step", 0) <= step]
    health = [r for r in _read_jsonl(records / "format_health.jsonl") if r.get("step", 0) <= step]
    losses = [r for r in _read_jsonl(records / "losses.jsonl") if r.get("step", 0) <= step]
    prepared = Path(str(run.get("prepared") or ""))
    data = recorded_data(run, prepared)
    model = recipe.get("model") or {}
    sft = recipe.get("sft") or {}
    config = _read_json(folder / "config.json") or _read_json(run_dir / "config.json") or {}
    distributed = run.get("distributed") or {}
    eval_summary = ((run.get("preflight") or {}).get("eval") or run.get("eval") or {})
    summary = data["summary"]
    return {
        "name": folder.name,
        "derived": derived,
        "base_model": model.get("path"),
        "base_model_on_hub": run["base_model_on_hub"] if isinstance(run.get("base_model_on_hub"), bool)
        else bool(model.get("path")) and _is_hub_model(str(model.get("path"))),
        "architecture": (config.get("architectures") or [config.get("model_type")])[0] if config else None,
        "model_type": config.get("model_type"),
        "parameters": parameter_count(folder),
        "lora": bool(run.get("lora")) and derived != "merged",
        "lora_config": recipe.get("lora") if run.get("lora") else None,
        "checkpoint_format": "from_pretrained" if derived else run.get("checkpoint_format"),
        "recipe_digest": recipe_digest(recipe),
        "recipe_output_dir": sft.get("output_dir"),
        "launcher": run.get("launcher") or launcher,
        "world_size": distributed.get("num_processes"),
        "distributed_type": distributed.get("type"),
        "zero_stage": distributed.get("zero_stage"),
        "fsdp_version": distributed.get("fsdp_version"),
        "global_step": step,
        "max_steps": sft.get("max_steps"),
        "learning_rate": sft.get("learning_rate"),
        "batch_size": sft.get("per_device_train_batch_size"),
        "prepared": str(prepared) if run.get("prepared") else None,
        "report_sha256": data["report_sha256"],
        "fingerprint": data["fingerprint"],
        "data_recorded": data["recorded"],
        "data_changed": data["changed"],
        "counts_known": bool(summary),
        "report_sha256_now": data["report_sha256_now"],
        "sources": summary.get("sources") or [],
        "hub_datasets": hub_dataset_ids(summary.get("configured_sources") or []),
        "rejected_by_code": dict(summary.get("rejected_by_code") or {}),
        "rows": summary.get("rows"),
        "tokens": summary.get("tokens"),
        "trained_tokens": summary.get("trained_tokens"),
        "verified": bool(summary.get("verified")),
        "trained_tool_call_tokens": summary.get("trained_tool_call_tokens") or 0,
        "train_rows": eval_summary.get("train_rows"),
        "eval_rows": eval_summary.get("eval_rows"),
        "eval_mode": eval_summary.get("mode"),
        "eval_dir": eval_summary.get("eval_dir"),
        "tokens_seen": int(losses[-1]["num_tokens"]) if losses and "num_tokens" in losses[-1] else None,
        "final_train_loss": losses[-1]["loss"] if losses else None,
        "final_train_loss_step": losses[-1]["step"] if losses else None,
        "eval_loss": [(r["step"], r["eval_loss"]) for r in evals],
        "format_health": [(r["step"], r["format_health"], len(r.get("outputs") or [])) for r in health],
        # The task scorer's counts by step ({name: {numerator, denominator, value}}), where the run had them.
        "task_metrics": [(r["step"], r["counts"]) for r in health if isinstance(r.get("counts"), dict) and r["counts"]],
    }


# ---------------------------------------------------------------------------- rendering


def _yaml_list(key: str, values: list[str]) -> list[str]:
    return [f"{key}:"] + [f"- {yaml_string(v)}" for v in values] if values else []


def yaml_string(value: Any) -> str:
    """A front-matter value: a JSON string (ASCII, every control character escaped), which YAML reads as
    a double-quoted scalar, so no value can end the front matter, add a key or a line.

    >>> yaml_string("a\\n---\\nb: 1")
    '"a\\\\n---\\\\nb: 1"'
    """
    text = json.dumps(str(value), ensure_ascii=False)  # escapes quotes, backslashes and C0 controls
    # YAML takes the rest of Unicode as it is, but for DEL and C1 controls, line and paragraph separators
    # (it folds them like line breaks), surrogates and non-characters: those as YAML's \\u escapes (a
    # surrogate pair written as two escapes would read back as two characters, so astral ones stay whole)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")


# Every character that can start Markdown syntax (ASCII punctuation, as CommonMark lets any be escaped
# with a backslash) and every line break (a new line could start a heading, a ``---`` rule, a list).
_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")


def md_text(value: Any) -> str:
    """``value`` as one line of inert Markdown text: line breaks become spaces and every ASCII
    punctuation character is backslash-escaped (no heading, emphasis, link, image, raw HTML, entity,
    table pipe or code span can come of it; it renders as the text it is).

    >>> md_text("x\\n# <img onerror=alert(1)> `a|b`")
    'x \\\\# \\\\<img onerror\\\\=alert\\\\(1\\\\)\\\\> \\\\`a\\\\|b\\\\`'
    """
    return _MD_SPECIAL.sub(r"\\\1", _LINE_BREAKS.sub(" ", str(value)))


def md_code(value: Any, *, table: bool = True) -> str:
    """``value`` as one code span: fenced by more backticks than its longest run of them (so a backtick
    cannot end it), padded when it starts or ends with one, line breaks made spaces; in a table
    (``table``) a pipe is escaped as GFM reads it inside a span. Raw HTML in a code span is text.

    >>> md_code("a`b"), md_code("`x"), md_code("a|b")
    ('``a`b``', '`` `x ``', '`a\\\\|b`')
    """
    text = _LINE_BREAKS.sub(" ", str(value)) or "-"
    if table:
        text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def front_matter(facts: dict) -> str:
    """The hub metadata: library, tags, and base model / datasets only where they are hub ids."""
    library = "peft" if facts["lora"] else "transformers"
    tags = ["beam-sft", "beam-harmony", "sft", "trl", "reasoning"]
    if facts["lora"]:
        tags.append("lora")
    if facts["trained_tool_call_tokens"]:
        tags.append("tool-calling")
    lines = ["---", f"library_name: {library}", "pipeline_tag: text-generation"]
    if facts["base_model_on_hub"]:
        lines.append(f"base_model: {yaml_string(facts['base_model'])}")
    lines += _yaml_list("datasets", facts["hub_datasets"])
    lines += _yaml_list("tags", tags)
    lines.append("---")
    return "\n".join(lines)


def _f(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return md_text(value)  # a value of another type came from a record: text, escaped


_md = md_text  # a table cell's text: md_text escapes the pipe too


def _total(counts: dict) -> Any:
    values = list(counts.values())
    return sum(values) if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else "-"


def quick_start(facts: dict, path: str) -> str:
    """Python that loads this folder, renders a prompt with the chat template, generates, and parses
    the turn back into a message with the response template (``tokenizer.parse_response``)."""
    return f'''```python
from transformers import AutoModelForCausalLM, AutoTokenizer

path = {_py_string(path)}
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path){"  # loads the base model, then this adapter (peft)" if facts["lora"] else ""}

tools = [{{"type": "function", "function": {{"name": "get_weather", "description": "Get the weather for a city.",
          "parameters": {{"type": "object", "properties": {{"city": {{"type": "string"}},
                         "unit": {{"type": "string", "enum": ["celsius", "fahrenheit"]}}}},
                         "required": ["city", "unit"]}}}}}}]
messages = [{{"role": "user", "content": "What is the weather in Paris in celsius?"}}]
# The chat template writes the Beam Harmony prompt, ending with the generation header.
prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False,
                                       reasoning_effort="low")
inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
# Generation stops at <|return|> (an answer) or <|call|> (tool calls): the generation config's eos ids.
output = model.generate(**inputs, max_new_tokens=128, do_sample=False)
turn = tokenizer.decode(output[0, inputs.input_ids.shape[1]:], skip_special_tokens=False)
# The response template reads the turn back: {{"role": "assistant", "thinking": ..., "content": ... or "tool_calls": [...]}}
message = tokenizer.parse_response(turn, prefix=prompt, tools=tools)
print(message)
```'''


def _py_string(text: str) -> str:
    """A Python string literal that cannot end the code fence it sits in: JSON's escapes are Python's,
    and a backtick is written as its escape (the fence is three backticks)."""
    return json.dumps(str(text)).replace("`", "\\u0060")


def _data_lines(facts: dict) -> list[str]:
    """What the Data section says about where its figures come from."""
    if not facts["data_recorded"]:
        return ["", "The run record names no data by digest (written by an older beam-sft): the figures below "
                    "are the prepared folder's as it is now, which may not be the data the model saw."]
    if not facts["data_changed"]:
        return []
    now = (f"its `report.json` has SHA-256 {md_code(facts['report_sha256_now'], table=False)} now"
           if facts["report_sha256_now"] else "its `report.json` is gone")
    said = ("the figures below are those the run recorded when it started" if facts["counts_known"]
            else "the run recorded the data's digests only, so no counts are stated")
    return ["", f"The prepared folder holds other data since this run read it ({now}): {said}."]


def render_card(facts: dict, *, path: str | None = None) -> str:
    """The card's Markdown (front matter first)."""
    out: list[str] = [front_matter(facts), "", f"# {md_text(facts['name'])}", ""]
    kind = ("a LoRA adapter" if facts["lora"] else "a LoRA fine-tune merged into its base" if facts["lora_config"]
            else "a full fine-tune")
    base = facts["base_model"] or "-"
    where = "" if facts["base_model_on_hub"] else " (a local checkpoint, not a hub model)"
    arch = f", {md_text(facts['architecture'])}" if facts["architecture"] else ""
    params = f", {_f(facts['parameters'])} parameters" if facts["parameters"] else ""
    out.append(f"{kind.capitalize()} of {md_code(base, table=False)}{where}{arch}{params}, trained with "
               "beam-sft (TRL's SFTTrainer) to speak Beam Harmony: an `analysis` message (reasoning) on "
               "every assistant turn, then a `final` answer or tool calls with XML arguments, ended by "
               "`<|return|>` or `<|call|>`.")
    if facts["derived"] == "merged":
        out += ["", "This folder is the LoRA adapter of that run merged into its base (`beam-sft merge`): a "
                    "standalone `from_pretrained` checkpoint."]
    elif facts["derived"] == "exported":
        out += ["", f"This folder is the run's sharded checkpoint at step {_f(facts['global_step'])} written as one "
                    "`from_pretrained` checkpoint (`beam-sft export`)."]
    elif facts["checkpoint_format"] not in (None, "from_pretrained"):
        out += ["", f"The weights here are a sharded {md_code(facts['checkpoint_format'], table=False)} checkpoint: run "
                    "`beam-sft export THIS_FOLDER -o OUT` before `from_pretrained`."]
    out += ["", "## Training", "", "| | |", "|---|---|",
            f"| base model | {md_code(base)} |",
            f"| recipe digest | `sha256:{facts['recipe_digest']}` (the recipe in `beam_run.json`, canonical JSON) |",
            f"| launcher | {_md(facts['launcher'] or 'not recorded')} |",
            f"| world size | {_f(facts['world_size'])} ({_md(facts['distributed_type'] or '-')}"
            + (f", ZeRO-{_f(facts['zero_stage'])}" if facts["zero_stage"] is not None else "")
            + (f", FSDP{_f(facts['fsdp_version'])}" if facts["fsdp_version"] is not None else "") + ") |",
            f"| steps | {_f(facts['global_step'])} of {_f(facts['max_steps'])} |",
            f"| learning rate | {_f(facts['learning_rate'], 6)} |",
            f"| batch size per process | {_f(facts['batch_size'])} |"]
    if facts["lora_config"]:
        lora = facts["lora_config"]
        out.append(f"| LoRA | r {_f(lora.get('r'))}, alpha {_f(lora.get('alpha'))}, "
                   f"targets {md_code(lora.get('target_modules'))} |")
    out += ["", "## Data", "", f"Prepared folder {md_code(facts['prepared'] or '-', table=False)} "
            f"({'verified' if facts['verified'] else 'NOT verified'}); its `report.json` had "
            f"SHA-256 {md_code(facts['report_sha256'] or '-', table=False)} when the run read it (fingerprint "
            f"{md_code(facts['fingerprint'] or '-', table=False)}).", *_data_lines(facts), "",
            "| source | format | read | kept | rejected (by code) | rows out |", "|---|---|---:|---:|---|---:|"]
    for s in facts["sources"]:
        rejected = ", ".join(f"{md_code(code)} {_f(n)}" for code, n in sorted(s["rejected"].items(), key=str)) or "-"
        out.append(f"| {md_code(s['name'])} | {md_text(s['format'])} | {_f(s['read'])} | {_f(s['kept'])} | "
                   f"{rejected} | {_f(s['rows_out'])} |")
    out += ["", "| | |", "|---|---|",
            f"| rows prepared | {_f(facts['rows'])} |",
            f"| rows rejected | {_f(_total(facts['rejected_by_code']))} |",
            f"| tokens | {_f(facts['tokens'])} |",
            f"| trained tokens (assistant mask) | {_f(facts['trained_tokens'])} |",
            f"| training rows / eval rows | {_f(facts['train_rows'])} / {_f(facts['eval_rows'])} "
            f"({md_code(facts['eval_mode']) if facts['eval_mode'] else 'no eval set'}"
            + (f": {md_code(facts['eval_dir'])}" if facts["eval_dir"] else "") + ") |",
            f"| tokens seen by the trainer (TRL `num_tokens`, context included) | {_f(facts['tokens_seen'])} |"]
    out += ["", "## Results at the end", "", "| | |", "|---|---|"]
    if facts["final_train_loss"] is not None:
        out.append(f"| train loss (step {_f(facts['final_train_loss_step'])}) | {_f(facts['final_train_loss'])} |")
    if facts["eval_loss"]:
        step, loss = facts["eval_loss"][-1]
        out.append(f"| eval loss (step {_f(step)}) | {_f(loss)} |")
    if facts["format_health"]:
        step, value, n = facts["format_health"][-1]
        out.append(f"| format health (step {_f(step)}) | {_f(value, 3)} of {_f(n)} greedy turns on eval prompts are valid "
                   "Beam turns |")
    if not facts["eval_loss"] and not facts["format_health"]:
        out.append("| eval | none: the recipe had no `data.eval` |")
    if len(facts["eval_loss"]) > 1:
        out += ["", "Eval loss by step: " + ", ".join(f"{_f(s)}: {_f(v, 3)}" for s, v in facts["eval_loss"]) + "."]
    if len(facts["format_health"]) > 1:
        out += ["", "Format health by step: " + ", ".join(f"{_f(s)}: {_f(v, 2)}" for s, v, _ in facts["format_health"])
                + "."]
    out += task_metric_tables(facts["task_metrics"])
    out += ["", "## Quick start", "", "The tokenizer carries the chat template (`chat_template.jinja`) and the "
            "response template (`response_template` in `tokenizer_config.json`):", "",
            quick_start(facts, path or facts["name"]), ""]
    return "\n".join(out)


def _count(entry: dict | None) -> str:
    if not entry or not entry.get("denominator"):
        return "-"
    n = entry["numerator"]  # a count of turns, or a sum of F1 scores (shown to 2 decimals)
    return f"{entry['value']:.3f} ({n:g}/{entry['denominator']})" if float(n).is_integer() else \
        f"{entry['value']:.3f} ({n:.2f}/{entry['denominator']})"


def task_metric_tables(curve: list[tuple[int, dict]]) -> list[str]:
    """The task metrics of the card's results (``train/format_health.py``; the scorer of ``beam-sft eval``):
    the last measurement with its counts, overall and by kind, and the curve: one row per measured step.

    >>> lines = task_metric_tables([(40, {"distinct_ratio": {"numerator": 1, "denominator": 8, "value": 0.125}})])
    >>> lines[-1]
    '| distinct_ratio | 0.125 (1/8) | - | - |'
    """
    if not curve:
        return []
    step, counts = curve[-1]
    out = ["", f"Task metrics at step {step}: greedy turns on eval prompts scored against the eval rows' own "
           "turns (value, right/counted; `-`: no turn counted):", "",
           "| metric | all | " + " | ".join(f"{k} turns" for k in KINDS) + " |", "|---|---:|" + "---:|" * len(KINDS)]
    for name in METRICS:
        out.append(f"| {name} | {_count(counts.get(name))} | "
                   + " | ".join(_count(counts.get(f"{name}_{k}")) for k in KINDS) + " |")
    if len(curve) > 1:
        out += ["", "Task metrics by step (all turns; tool turns / plain turns):", "",
                "| step | " + " | ".join(METRICS) + " |", "|---:|" + "---|" * len(METRICS)]
        for step, counts in curve:
            cells = []
            for name in METRICS:
                parts = [counts.get(name), *(counts.get(f"{name}_{k}") for k in KINDS)]
                shown = [f"{p['value']:.2f}" if p and p.get("denominator") else "-" for p in parts]
                cells.append(f"{shown[0]} ({' / '.join(shown[1:])})")
            out.append(f"| {step} | " + " | ".join(cells) + " |")
    return out


def write_model_card(folder: str | Path, *, run_folder: str | Path | None = None, derived: str | None = None,
                     launcher: str | None = None) -> Path:
    """Replace ``folder/README.md`` with this run's card and return its path.

    ``launcher`` (the trained folder's card, written in the training process) is also added to the
    run record, with whether the base model came from the hub (decided there, where the recipe's
    relative paths mean what they meant to the run), so the cards of folders merged or exported from
    it later, from anywhere, still say the same."""
    folder = Path(folder)
    if launcher is not None and derived is None:
        record = folder / RUN_FILE
        run = _read_json(record)
        if isinstance(run, dict):
            base = ((run.get("recipe") or {}).get("model") or {}).get("path")
            run.update(launcher=launcher, base_model_on_hub=bool(base) and _is_hub_model(str(base)))
            record.write_text(json.dumps(run, indent=2, default=str) + "\n", encoding="utf-8")
    facts = card_facts(folder, run_folder=run_folder, derived=derived, launcher=launcher)
    path = folder / CARD_FILE
    path.write_text(render_card(facts, path=str(folder)), encoding="utf-8")
    return path
