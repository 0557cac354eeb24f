"""Pre-flight: checks that fail the run, with a clear message, before training step 1.

1. ``check_tokenizer``: the prepared tokenizer is fit for Beam Harmony; ``check_model_tokenizer``
   (before the weights load): it is the model's own tokenizer (same vocabulary and added tokens, ids
   included) and fits the model's embedding rows.
2. ``check_generation_eos``: ``<|return|>`` is an eos token of the model's generation config, so the
   trained model stops where it was trained to stop.
3. ``check_batches``: the trainer's **own** first batches, from its own dataloader (after TRL's
   truncation and packing), have labels equal to input_ids exactly where our ``assistant_masks``
   are 1 and -100 elsewhere. Each sequence in a batch is found again in the prepared dataset by its
   tokens (packed sequences are split at their position-id restarts).
4. ``check_rows``: the rows behind those batches re-encode (from their canonical BeamRow, through
   the chat template) to the stored ids and masks, and every trained span runs from an assistant
   message's ``<|channel|>`` to its ``<|return|>``/``<|call|>``. A corrupted mask fails here: TRL
   would faithfully train on it, so the batch check alone cannot see it.
5. Packing isolation (``packing.check_isolation``) runs on the first packed batch once the model is
   wrapped for its distributed set-up (``PackingIsolationCallback``), since a forward under
   ZeRO-3/FSDP needs the wrapped model.

Every process checks its own batches; the verdicts are gathered, so all processes stop together
instead of the healthy ones waiting forever in a collective.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from beam_sft.compat.datasets_table import rows_are_table_rows
from beam_sft.encode.template_encode import encode_row
from beam_sft.errors import PreflightError
from beam_sft.harmony import markers
from beam_sft.harmony.check import require_fit_tokenizer
from beam_sft.harmony.spans import mask_runs
from beam_sft.train.model_shape import load_model_config
from beam_sft.train.packing import is_packed_batch, segments

MAX_LISTED = 8  # problems listed in the error message


@dataclass
class PreflightReport:
    batches: int = 0
    sequences: int = 0
    rows_checked: int = 0
    packed: bool = False
    packing_max_logit_diff: float | None = None
    packing_compared_sequences: int | None = None  # sequences packed after another that were compared
    # the counterfactual: how far a sequence's logits moved when the one before it changed (packing.py)
    packing_leak_diff: float | None = None
    packing_compute_dtype: str | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "problems"}


# ---------------------------------------------------------------------------- tokenizer and model


def check_tokenizer(tokenizer) -> list[str]:
    """The Beam Harmony rules for a tokenizer (``beam_sft.harmony.check``); TokenizerError lists all.
    Returns the warnings (response template) when it is fit."""
    return require_fit_tokenizer(tokenizer)


def check_model_tokenizer(model_path: str, tokenizer, *, trust_remote_code: bool = False) -> None:
    """Before the weights load: the prepared tokenizer must be the model's own, and fit its embeddings.

    Compares the vocabulary and the added tokens (content, id and special flag) with the tokenizer
    shipped beside the model, and the tokenizer's size with the config's ``vocab_size`` (the
    embedding rows). A tokenizer with more tokens than rows would index past the embeddings; one
    with fewer, or with the same size but other ids, would train the wrong rows silently.
    """
    from transformers import AutoTokenizer

    from beam_sft.model_support import missing_support, model_type_at

    if problem := missing_support(model_type_at(model_path)):  # AutoConfig would not say what to install
        raise PreflightError(f"pre-flight failed: {model_path}: {problem}")
    config = load_model_config(model_path, trust_remote_code=trust_remote_code)  # one line when it has none
    rows = getattr(config.get_text_config(), "vocab_size", None)
    try:
        own = AutoTokenizer.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError):  # no tokenizer beside the weights
        own = None
    if own is not None:
        problems = tokenizer_differences(tokenizer, own)
        if problems:
            raise PreflightError.of_lines(
                f"the prepared tokenizer is not the model's own ({model_path}):",
                *(f"  - {p}" for p in problems[:MAX_LISTED]),
                "Re-run `beam-sft prepare` with the model's tokenizer (data.prepare.tokenizer, or leave it "
                "out to use the model's).",
            )
    size = len(tokenizer)
    if rows is not None and (size > rows or (own is None and size != rows)):
        raise PreflightError(
            f"the prepared tokenizer has {size} tokens but {model_path} has {rows} embedding rows "
            f"(config vocab_size): {'ids past the last row would index nothing' if size > rows else 'rows and ids do not line up'}. "
            "The prepared tokenizer does not belong to this model: re-prepare with the model's tokenizer."
        )


def tokenizer_differences(prepared, own) -> list[str]:
    """Every difference between two tokenizers' vocabularies and added tokens, ids included."""
    problems = []
    if len(prepared) != len(own):
        problems.append(f"{len(prepared)} tokens in the prepared tokenizer, {len(own)} in the model's")
    a, b = prepared.get_vocab(), own.get_vocab()
    moved = sorted((t for t in a.keys() & b.keys() if a[t] != b[t]), key=lambda t: a[t])
    if moved:
        shown = ", ".join(f"{t!r} is {a[t]} here, {b[t]} in the model's" for t in moved[:4])
        problems.append(f"{len(moved)} token(s) have other ids: {shown}{' ...' if len(moved) > 4 else ''}")
    only = sorted(a.keys() - b.keys(), key=lambda t: a[t])
    if only:
        problems.append(f"{len(only)} token(s) only in the prepared tokenizer, e.g. {only[:4]}")
    missing = sorted(b.keys() - a.keys(), key=lambda t: b[t])
    if missing:
        problems.append(f"{len(missing)} token(s) only in the model's tokenizer, e.g. {missing[:4]}")
    added_a = {i: (t.content, t.special) for i, t in prepared.added_tokens_decoder.items()}
    added_b = {i: (t.content, t.special) for i, t in own.added_tokens_decoder.items()}
    if added_a != added_b:
        diff = sorted(set(added_a.items()) ^ set(added_b.items()))
        problems.append(f"added tokens differ (id, (content, special)): {diff[:6]}")
    return problems


def check_generation_eos(model, tokenizer) -> None:
    """``<|return|>`` must be among the generation config's eos ids."""
    return_id = tokenizer.convert_tokens_to_ids(markers.RETURN)
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None) if config is not None else None
    eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
    if return_id not in eos_ids:
        raise PreflightError(
            f"{markers.RETURN} (id {return_id}) is not an eos token of the model's generation config "
            f"(eos_token_id={eos!r}): the trained model would not stop after its answer. If the model's own "
            f"tokenizer gives {markers.RETURN} this id, add it to generation_config.json's eos_token_id (with "
            "<|call|>); if not, the prepared tokenizer is not the model's: re-prepare with the model's tokenizer."
        )


def check_vocab(model, tokenizer) -> None:
    """Every tokenizer id must have an embedding row."""
    embeddings = model.get_input_embeddings()
    rows = embeddings.num_embeddings if hasattr(embeddings, "num_embeddings") else None
    if rows is not None and 0 < rows < len(tokenizer):
        raise PreflightError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {rows} embedding rows: "
            "the prepared tokenizer does not belong to this model"
        )


# ---------------------------------------------------------------------------- batches


def batch_sequences(batch: dict, pad_token_id: int) -> list[tuple[list[int], list[int]]]:
    """Split a collated batch into ``(input_ids, labels)`` per original sequence.

    Padded batches are cut at their attention mask; packed (padding-free) batches at the
    position-id restarts, dropping the one-token pad segments padding adds.

    >>> import torch
    >>> batch = {"input_ids": torch.tensor([[5, 6, 7, 8, 9]]), "labels": torch.tensor([[-100, 6, -100, 8, 9]]),
    ...          "position_ids": torch.tensor([[0, 1, 0, 1, 2]])}
    >>> batch_sequences(batch, pad_token_id=0)
    [([5, 6], [-100, 6]), ([7, 8, 9], [-100, 8, 9])]
    """
    ids = batch["input_ids"].tolist()
    labels = batch["labels"].tolist()
    out = []
    if is_packed_batch(batch):
        for row, positions in enumerate(batch["position_ids"].tolist()):
            for start, end in segments(positions):
                seg_ids, seg_labels = ids[row][start:end], labels[row][start:end]
                if end - start == 1 and seg_ids[0] == pad_token_id and seg_labels[0] == -100:
                    continue
                out.append((seg_ids, seg_labels))
        return out
    mask = batch["attention_mask"].tolist() if "attention_mask" in batch else None
    for row in range(len(ids)):
        n = sum(mask[row]) if mask is not None else len(ids[row])
        out.append((ids[row][:n], labels[row][:n]))
        if any(lbl != -100 for lbl in labels[row][n:]):
            out.append((ids[row], labels[row]))  # a trained pad token: reported as unmatched below
    return out


class RowIndex:
    """Finds the prepared rows a (possibly truncated) sequence came from: by length, then by a few
    tokens compared column-wise in Arrow, then token by token."""

    def __init__(self, dataset, *, max_length: int | None, truncation_mode: str = "keep_start"):
        # Only the token columns are read while scanning candidates (the row JSON can be large).
        self.tokens = dataset.select_columns(["input_ids", "assistant_masks"])
        self.max_length = max_length
        self.keep_end = truncation_mode == "keep_end"
        self.lengths = _lengths(dataset)

    def candidates(self, ids: list[int]) -> list[int]:
        import numpy as np

        length = len(ids)
        truncated = self.max_length is not None and length >= self.max_length
        found = np.flatnonzero(self.lengths >= length if truncated else self.lengths == length)
        if truncated and self.keep_end:
            return found.tolist()
        return self._narrow(found, ids).tolist()

    def _narrow(self, rows, ids: list[int]):
        """Keep the rows whose tokens agree with ``ids`` at a few positions (vectorized)."""
        import numpy as np
        import pyarrow.compute as pc

        if len(rows) <= 8 or not rows_are_table_rows(self.tokens):
            return rows
        column = self.tokens.data.column("input_ids")
        for position in sorted({len(ids) - 1, len(ids) // 2, len(ids) // 3}):
            if len(rows) <= 8:
                break
            values = pc.list_element(column.take(rows), position).to_numpy(zero_copy_only=False)
            rows = rows[np.asarray(values) == ids[position]]
        return rows

    def cut(self, values: list[int], length: int) -> list[int]:
        if len(values) == length:
            return list(values)
        return list(values[-length:]) if self.keep_end else list(values[:length])


def _lengths(dataset):
    """Token count of every row, straight from Arrow when the dataset has no index mapping."""
    import numpy as np

    if rows_are_table_rows(dataset):
        import pyarrow.compute as pc

        return np.asarray(pc.list_value_length(dataset.data.column("input_ids")).to_numpy(zero_copy_only=False))
    return np.asarray([len(x) for x in dataset["input_ids"]])


def expected_labels(ids: list[int], mask: list[int], assistant_only_loss: bool) -> list[int]:
    """Labels the trainer must see: the token where it is trained, -100 elsewhere.

    >>> expected_labels([5, 6, 7], [0, 1, 1], True)
    [-100, 6, 7]
    >>> expected_labels([5, 6, 7], [0, 1, 1], False)
    [5, 6, 7]
    """
    if not assistant_only_loss:
        return list(ids)
    return [t if m == 1 else -100 for t, m in zip(ids, mask, strict=True)]


def label_mismatches(labels: list[int], expected: list[int]) -> list[int]:
    """Positions where ``labels`` differ from ``expected``. Position 0 is never a target (labels are
    shifted), and TRL sets it to -100 at every packed sequence start, so -100 is accepted there."""
    bad = [i for i, (a, b) in enumerate(zip(labels, expected, strict=True)) if a != b]
    return [i for i in bad if not (i == 0 and labels[0] == -100)]


def check_batches(batches: list[dict], dataset, index: RowIndex, *, assistant_only_loss: bool,
                  pad_token_id: int) -> tuple[list[str], list[int], int]:
    """Compare each batch sequence's labels with the masks of the row it came from.

    Returns ``(problems, matched dataset indices, number of sequences)``.
    """
    problems: list[str] = []
    matched: list[int] = []
    count = 0
    for b, batch in enumerate(batches):
        for s, (ids, labels) in enumerate(batch_sequences(batch, pad_token_id)):
            count += 1
            where = f"batch {b} sequence {s} ({len(ids)} tokens)"
            found_ids = False
            best: tuple[int, list[int]] | None = None
            for idx in index.candidates(ids):
                row = index.tokens[int(idx)]
                if index.cut(row["input_ids"], len(ids)) != ids:
                    continue
                found_ids = True
                mask = index.cut(row["assistant_masks"], len(ids))
                bad = label_mismatches(labels, expected_labels(ids, mask, assistant_only_loss))
                if not bad:
                    best = (int(idx), [])
                    break
                if best is None:
                    best = (int(idx), bad)
            if not found_ids:
                problems.append(f"{where}: its tokens match no row of the prepared dataset "
                                "(the trainer changed the tokens: re-rendered, added or padded them)")
            elif best is not None and best[1]:
                idx, bad = best
                problems.append(
                    f"{where}: labels differ from the masks of row {_row_name(dataset, idx)} at positions "
                    f"{bad[:10]}{' ...' if len(bad) > 10 else ''} "
                    f"(expected {'the token where the mask is 1, -100 elsewhere' if assistant_only_loss else 'every token'})"
                )
            if best is not None:
                matched.append(best[0])
    return problems, matched, count


# ---------------------------------------------------------------------------- rows


def _row_name(dataset, idx: int) -> str:
    record = dataset[int(idx)]
    source, row = record.get("source"), record.get("row_index")
    return f"{idx} ({source}:{row})" if source is not None else str(idx)


def span_problems(ids: list[int], mask: list[int], tokenizer) -> list[str]:
    """Structural rule: every trained span starts at ``<|channel|>`` and ends at ``<|return|>`` or
    ``<|call|>`` (or at the end of a truncated row)."""
    if len(ids) != len(mask):
        return [f"{len(ids)} input_ids but {len(mask)} mask values"]
    if any(m not in (0, 1) for m in mask):
        return ["mask has values other than 0 and 1"]
    channel = tokenizer.convert_tokens_to_ids(markers.CHANNEL)
    stops = {tokenizer.convert_tokens_to_ids(m) for m in markers.STOP_MARKERS}
    out = []
    for start, end in mask_runs(mask):
        if ids[start] != channel:
            out.append(f"trained span {start}:{end} starts at {tokenizer.convert_ids_to_tokens(ids[start])!r}, "
                       f"not {markers.CHANNEL}")
        elif end < len(ids) and ids[end - 1] not in stops:
            out.append(f"trained span {start}:{end} ends at {tokenizer.convert_ids_to_tokens(ids[end - 1])!r}, "
                       f"not {markers.RETURN} or {markers.CALL}")
    return out


def check_rows(dataset, indices: list[int], tokenizer, *, max_rows: int) -> tuple[list[str], int]:
    """Re-encode rows from their canonical BeamRow and compare ids and masks with what is stored.

    A stored row may be a truncation of its encoding (the prepare length policy), so the stored
    values must be a prefix of the re-encoded ones.
    """
    problems: list[str] = []
    seen = list(dict.fromkeys(indices))[:max_rows]
    for idx in seen:
        record = dataset[int(idx)]
        ids, mask = list(record["input_ids"]), list(record["assistant_masks"])
        name = _row_name(dataset, idx)
        for problem in span_problems(ids, mask, tokenizer):
            problems.append(f"row {name}: {problem}")
        if "row" not in record or record["row"] is None:
            continue
        try:
            fresh = encode_row(json.loads(record["row"]), tokenizer)
        except Exception as exc:  # the row no longer renders: as fatal as a wrong mask
            problems.append(f"row {name}: does not re-encode: {exc}")
            continue
        if fresh["input_ids"][: len(ids)] != ids:
            problems.append(f"row {name}: stored input_ids differ from the chat template's rendering")
        elif fresh["assistant_masks"][: len(mask)] != mask:
            bad = [i for i, (a, b) in enumerate(zip(mask, fresh["assistant_masks"], strict=False)) if a != b]
            problems.append(f"row {name}: stored assistant_masks differ from the template's (weights applied) "
                            f"at positions {bad[:10]}{' ...' if len(bad) > 10 else ''}")
    return problems, len(seen)


# ---------------------------------------------------------------------------- collective verdict


def agree(problems: list[str], accelerator=None, watch=None, what: str = "the pre-flight") -> list[str]:
    """Every process's problems, gathered, so that all processes raise or none does. With a
    ``RankWatch``, a process that does not arrive in time is named instead of hanging the others."""
    if accelerator is None or accelerator.num_processes <= 1:
        return problems
    from accelerate.utils import gather_object

    if watch is not None:
        watch.barrier(what)
    gathered = gather_object([problems])
    out: list[str] = []
    for rank, items in enumerate(gathered):
        out.extend(f"[process {rank}] {p}" for p in items)
    return out


def raise_if(problems: list[str], what: str) -> None:
    if not problems:
        return
    more = [f"  ... and {len(problems) - MAX_LISTED} more"] if len(problems) > MAX_LISTED else []
    raise PreflightError.of_lines(f"pre-flight failed ({what}):", *(f"  - {p}" for p in problems[:MAX_LISTED]), *more)


def first_batches(trainer, count: int) -> list[dict]:
    """The first ``count`` batches of the trainer's own (prepared, distributed) dataloader."""
    batches = []
    for batch in trainer.get_train_dataloader():
        batches.append(batch)
        if len(batches) >= count:
            break
    return batches


def run_data_checks(trainer, dataset, tokenizer, recipe, watch=None) -> tuple[PreflightReport, list[dict]]:
    """Checks 3 and 4 on this process's first batches; raises PreflightError on every process if
    any process found a problem. Returns the report and the batches (for the packing check)."""
    args = trainer.args
    report = PreflightReport()
    batches = first_batches(trainer, recipe.preflight.batches)
    index = RowIndex(dataset, max_length=args.max_length, truncation_mode=args.truncation_mode)
    problems, matched, count = check_batches(
        batches, dataset, index, assistant_only_loss=recipe.assistant_only_loss,
        pad_token_id=tokenizer.pad_token_id,
    )
    row_problems, rows_checked = check_rows(dataset, matched, tokenizer, max_rows=recipe.preflight.max_rows)
    problems = agree(problems + row_problems, trainer.accelerator, watch, "the pre-flight data checks")
    report.batches, report.sequences, report.rows_checked = len(batches), count, rows_checked

    report.packed = bool(batches) and is_packed_batch(batches[0])
    raise_if(problems, "the trainer's first batches do not match the prepared masks")
    return report, batches
