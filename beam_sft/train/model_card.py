"""The model card (``README.md``) of a trained, merged or exported folder: what this run trained.

TRL's default card knows nothing of the run ("a fine-tuned version of None", a quick start that
never renders the chat template). This one is built only from records the run left behind, so it
says nothing that is not true of it:

* ``beam_run.json`` (``train/save.py``): the recipe (and its digest), the prepared folder, world size
  and distribution, LoRA or full, checkpoint format, the step reached;
* ``metrics.jsonl`` and ``format_health.jsonl`` (``train/run_log.py``, ``train/format_health.py``):
  eval loss and format health by step; ``losses.jsonl``: training loss and tokens seen;
* the prepared folder's ``report.json``: sources, rows kept and rejected by reason code, tokens and
  trained tokens, and the report's own SHA-256;
* the weights' safetensors headers: parameter count; ``config.json``: the architecture.

``card_facts(folder)`` gathers them (pure reading, no model load), ``render_card(facts)`` writes the
Markdown with hub front matter (``base_model`` and ``datasets`` only where they are hub ids), and
``write_model_card(folder)`` replaces whatever card is there. A merged or exported folder gets the
card of the run it came from plus a line saying how it was made (``derived=``).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from beam_sft.evaluate.metrics import KINDS, METRICS
from beam_sft.prepared.layout import REPORT_FILE

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


def parameter_count(folder: Path) -> int | None:
    """Parameters in the folder's safetensors files, from their headers (no tensor is read)."""
    total, found = 0, False
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with path.open("rb") as fh:
                size = struct.unpack("<Q", fh.read(8))[0]
                header = json.loads(fh.read(size))
        except (OSError, ValueError, struct.error):
            return None
        for name, entry in header.items():
            if name == "__metadata__" or not isinstance(entry, dict):
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
    from beam_sft.errors import BeamError

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
        from beam_sft.errors import BeamError

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
    report = _read_json(prepared / REPORT_FILE) if run.get("prepared") else None
    report = report if isinstance(report, dict) else {}
    model = recipe.get("model") or {}
    sft = recipe.get("sft") or {}
    config = _read_json(folder / "config.json") or _read_json(run_dir / "config.json") or {}
    distributed = run.get("distributed") or {}
    eval_summary = ((run.get("preflight") or {}).get("eval") or run.get("eval") or {})
    tokens = report.get("tokens") or {}
    sources = []
    for name, entry in (report.get("sources") or {}).items():
        if isinstance(entry, dict):
            sources.append({"name": name, "format": entry.get("format"), "read": entry.get("read", 0),
                            "kept": entry.get("kept", 0), "rejected": dict(entry.get("rejected") or {}),
                            "rows_out": entry.get("rows_out", 0)})
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
        "report_sha256": file_sha256(prepared / REPORT_FILE) if run.get("prepared") else None,
        "fingerprint": report.get("fingerprint"),
        "sources": sources,
        "hub_datasets": hub_dataset_ids((report.get("config") or {}).get("sources") or []),
        "rejected_by_code": dict((report.get("rejects") or {}).get("by_code") or {}),
        "rows": tokens.get("rows"),
        "tokens": tokens.get("total"),
        "trained_tokens": tokens.get("trained"),
        "verified": bool((report.get("verify") or {}).get("ok")),
        "trained_tool_call_tokens": (((report.get("verify") or {}).get("trained_by_channel") or {})
                                     .get("tool_call") or {}).get("tokens", 0),
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
    return [f"{key}:"] + [f"- {json.dumps(v)}" for v in values] if values else []


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
        lines.append(f"base_model: {json.dumps(facts['base_model'])}")
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
    return str(value)


def _md(text: Any) -> str:
    """A table cell: pipes and newlines would break the row; backslash-escape the one, drop the other."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def quick_start(facts: dict, path: str) -> str:
    """Python that loads this folder, renders a prompt with the chat template, generates, and parses
    the turn back into a message with the response template (``tokenizer.parse_response``)."""
    return f'''```python
from transformers import AutoModelForCausalLM, AutoTokenizer

path = {json.dumps(path)}
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


def render_card(facts: dict, *, path: str | None = None) -> str:
    """The card's Markdown (front matter first)."""
    out: list[str] = [front_matter(facts), "", f"# {facts['name']}", ""]
    kind = ("a LoRA adapter" if facts["lora"] else "a LoRA fine-tune merged into its base" if facts["lora_config"]
            else "a full fine-tune")
    base = facts["base_model"] or "-"
    where = "" if facts["base_model_on_hub"] else " (a local checkpoint, not a hub model)"
    arch = f", {facts['architecture']}" if facts["architecture"] else ""
    params = f", {facts['parameters']:,} parameters" if facts["parameters"] else ""
    out.append(f"{kind.capitalize()} of `{base}`{where}{arch}{params}, trained with "
               "beam-sft (TRL's SFTTrainer) to speak Beam Harmony: an `analysis` message (reasoning) on "
               "every assistant turn, then a `final` answer or tool calls with XML arguments, ended by "
               "`<|return|>` or `<|call|>`.")
    if facts["derived"] == "merged":
        out += ["", "This folder is the LoRA adapter of that run merged into its base (`beam-sft merge`): a "
                    "standalone `from_pretrained` checkpoint."]
    elif facts["derived"] == "exported":
        out += ["", f"This folder is the run's sharded checkpoint at step {facts['global_step']} written as one "
                    "`from_pretrained` checkpoint (`beam-sft export`)."]
    elif facts["checkpoint_format"] not in (None, "from_pretrained"):
        out += ["", f"The weights here are a sharded `{facts['checkpoint_format']}` checkpoint: run "
                    "`beam-sft export THIS_FOLDER -o OUT` before `from_pretrained`."]
    out += ["", "## Training", "", "| | |", "|---|---|",
            f"| base model | `{_md(base)}` |",
            f"| recipe digest | `sha256:{facts['recipe_digest']}` (the recipe in `beam_run.json`, canonical JSON) |",
            f"| launcher | {_md(facts['launcher'] or 'not recorded')} |",
            f"| world size | {_f(facts['world_size'])} ({_md(facts['distributed_type'] or '-')}"
            + (f", ZeRO-{facts['zero_stage']}" if facts["zero_stage"] is not None else "")
            + (f", FSDP{facts['fsdp_version']}" if facts["fsdp_version"] is not None else "") + ") |",
            f"| steps | {_f(facts['global_step'])} of {_f(facts['max_steps'])} |",
            f"| learning rate | {_f(facts['learning_rate'], 6)} |",
            f"| batch size per process | {_f(facts['batch_size'])} |"]
    if facts["lora_config"]:
        lora = facts["lora_config"]
        out.append(f"| LoRA | r {_md(lora.get('r'))}, alpha {_md(lora.get('alpha'))}, "
                   f"targets {_md(lora.get('target_modules'))} |")
    out += ["", "## Data", "", f"Prepared folder `{_md(facts['prepared'] or '-')}` "
            f"({'verified' if facts['verified'] else 'NOT verified'}); its `report.json` has "
            f"SHA-256 `{facts['report_sha256'] or '-'}` (fingerprint `{facts['fingerprint'] or '-'}`).", "",
            "| source | format | read | kept | rejected (by code) | rows out |", "|---|---|---:|---:|---|---:|"]
    for s in facts["sources"]:
        rejected = ", ".join(f"{code} {n}" for code, n in sorted(s["rejected"].items())) or "-"
        out.append(f"| `{_md(s['name'])}` | {_md(s['format'])} | {_f(s['read'])} | {_f(s['kept'])} | "
                   f"{_md(rejected)} | {_f(s['rows_out'])} |")
    out += ["", "| | |", "|---|---|",
            f"| rows prepared | {_f(facts['rows'])} |",
            f"| rows rejected | {_f(sum(facts['rejected_by_code'].values()))} |",
            f"| tokens | {_f(facts['tokens'])} |",
            f"| trained tokens (assistant mask) | {_f(facts['trained_tokens'])} |",
            f"| training rows / eval rows | {_f(facts['train_rows'])} / {_f(facts['eval_rows'])} "
            f"({_md(facts['eval_mode'] or 'no eval set')}"
            + (f": `{_md(facts['eval_dir'])}`" if facts["eval_dir"] else "") + ") |",
            f"| tokens seen by the trainer (TRL `num_tokens`, context included) | {_f(facts['tokens_seen'])} |"]
    out += ["", "## Results at the end", "", "| | |", "|---|---|"]
    if facts["final_train_loss"] is not None:
        out.append(f"| train loss (step {facts['final_train_loss_step']}) | {_f(facts['final_train_loss'])} |")
    if facts["eval_loss"]:
        step, loss = facts["eval_loss"][-1]
        out.append(f"| eval loss (step {step}) | {_f(loss)} |")
    if facts["format_health"]:
        step, value, n = facts["format_health"][-1]
        out.append(f"| format health (step {step}) | {_f(value, 3)} of {n} greedy turns on eval prompts are valid "
                   "Beam turns |")
    if not facts["eval_loss"] and not facts["format_health"]:
        out.append("| eval | none: the recipe had no `data.eval` |")
    if len(facts["eval_loss"]) > 1:
        out += ["", "Eval loss by step: " + ", ".join(f"{s}: {_f(v, 3)}" for s, v in facts["eval_loss"]) + "."]
    if len(facts["format_health"]) > 1:
        out += ["", "Format health by step: " + ", ".join(f"{s}: {_f(v, 2)}" for s, v, _ in facts["format_health"])
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
