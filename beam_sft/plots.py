"""The prepared data at a glance: one PNG beside ``report.json`` (``report_lengths.png``).

Three panels: the distribution of row lengths (with ``max_length`` marked), the trained fraction
per row, and the trained tokens by channel (``analysis`` reasoning, ``final`` answers, tool calls
and anything else, as the verify statistics count them). It extends verify's histogram with the
channel panel; ``write_report_plot`` takes the same figures verify already computes, and
``plot_prepared`` reads them back from a prepared folder.

matplotlib is optional (the ``viz`` extra): without it nothing is drawn and None is returned. The
object API with the Agg canvas is used, not pyplot, so no global backend is switched.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PLOT_FILE = "report_lengths.png"


def channel_fractions(trained_by_channel: Mapping[str, Any] | None) -> dict[str, float]:
    """``{channel: fraction of trained tokens}`` from verify's ``trained_by_channel`` section.

    >>> channel_fractions({"analysis": {"tokens": 30, "fraction_of_trained": 0.3}, "final": {"tokens": 70}})
    {'analysis': 0.3, 'final': 0.7}
    """
    if not trained_by_channel:
        return {}
    entries = dict(trained_by_channel)
    tokens = {k: (v.get("tokens", 0) if isinstance(v, Mapping) else v) for k, v in entries.items()}
    total = sum(t for t in tokens.values() if isinstance(t, (int, float)))
    out = {}
    for name, entry in entries.items():
        if isinstance(entry, Mapping) and isinstance(entry.get("fraction_of_trained"), (int, float)):
            out[name] = float(entry["fraction_of_trained"])
        else:
            out[name] = tokens[name] / total if total else 0.0
    return out


def report_figure(lengths: Sequence[int], fractions: Sequence[float],
                  trained_by_channel: Mapping[str, Any] | None = None, *, max_length: int | None = None):
    """The matplotlib Figure (None without matplotlib)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        warnings.warn(f"matplotlib is not installed: skipping {PLOT_FILE}", stacklevel=3)
        return None
    fig = Figure(figsize=(14, 3.8))
    FigureCanvasAgg(fig)
    lengths_ax, fraction_ax, channel_ax = fig.subplots(1, 3)
    lengths_ax.hist(list(lengths), bins=min(50, max(1, len(set(lengths)))), color="#4477aa")
    if max_length:
        lengths_ax.axvline(max_length, color="#cc3311", linestyle="--", label=f"max_length {max_length}")
        lengths_ax.legend(loc="upper right", fontsize=8)
    lengths_ax.set_xlabel("tokens per row")
    lengths_ax.set_ylabel("rows")
    lengths_ax.set_title(f"row length ({len(lengths)} rows)")
    fraction_ax.hist(list(fractions), bins=20, range=(0.0, 1.0), color="#228833")
    fraction_ax.set_xlabel("trained tokens / tokens")
    fraction_ax.set_title("trained fraction per row")
    shares = channel_fractions(trained_by_channel)
    names = list(shares)
    bars = channel_ax.bar(names, [shares[n] for n in names], color="#ee7733")
    for bar, name in zip(bars, names, strict=True):
        channel_ax.annotate(f"{100 * shares[name]:.1f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=8)
    channel_ax.set_ylim(0, 1.05)
    channel_ax.set_ylabel("share of trained tokens")
    channel_ax.set_title("trained tokens by channel")
    fig.tight_layout()
    return fig


def write_report_plot(directory: str | Path, lengths: Sequence[int], fractions: Sequence[float],
                      trained_by_channel: Mapping[str, Any] | None = None, *, max_length: int | None = None,
                      name: str = PLOT_FILE) -> Path | None:
    """DIR/report_lengths.png (module doc); None without matplotlib."""
    fig = report_figure(lengths, fractions, trained_by_channel, max_length=max_length)
    if fig is None:
        return None
    path = Path(directory) / name
    fig.savefig(path, dpi=100)
    return path


def plot_prepared(directory: str | Path, *, out: str | Path | None = None) -> Path | None:
    """Draw the plot of a prepared folder from its ``num_tokens``/``num_trained`` columns and the
    ``verify`` section of its ``report.json``, into ``out`` (default: beside ``report.json``)."""
    from datasets import load_from_disk

    directory = Path(directory)
    dataset = load_from_disk(str(directory)).select_columns(["num_tokens", "num_trained"])
    lengths = [int(n) for n in dataset["num_tokens"]]
    fractions = [t / n if n else 0.0 for t, n in zip(dataset["num_trained"], lengths, strict=True)]
    try:
        report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = {}
    verify = report.get("verify") or {}
    max_length = (report.get("length_policy") or {}).get("max_length")
    return write_report_plot(Path(out) if out is not None else directory, lengths, fractions,
                             verify.get("trained_by_channel"), max_length=max_length)
