"""``beam-sft report DIR -o report.html``: one self-contained page about a prepared folder.

What it shows, all read from the folder itself (``report.json``, ``rejects.jsonl``, the dataset's
``num_tokens``/``num_trained`` columns, a few rows):

* the per-source table (read, kept, rejected, rows out, tokens, trained fraction);
* rejected rows by reason code, with the code's meaning and a few examples each (raw row, message);
* histograms of row length and of trained fraction per row, the trained share by channel (inline SVG);
* token statistics and verify's result (violations by rule, coverage);
* a handful of rows drawn with their masks coloured exactly as ``inspect --html`` draws them.

The page needs no network: no scripts, no external style sheets, fonts or images. Every piece of
text that comes from data (sources, rows, messages, reason messages, token text) goes through
``html.escape``, so a hostile row renders as text, and its control and bidi characters are shown as
escapes (``visible.html_text``), so an override cannot reverse what follows it. ``prepare`` writes it beside every folder it
publishes (``REPORT_PAGE``; written after the digests are taken, so, like ``report.json``, it is not
digested).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from beam_sft.dataset_folder.layout import REJECTS_FILE, REPORT_FILE, REPORT_PAGE, VIOLATIONS_FILE
from beam_sft.errors import BeamError, PreparedError
from beam_sft.verify.page_head import page_head
from beam_sft.visible import cut
from beam_sft.visible import html_text as escape  # html.escape, then controls shown

EXAMPLES_PER_CODE = 3
SAMPLE_ROWS = 4
_RAW_CHARS = 1500  # a raw row longer than this is cut in the page (the rejects file has it whole)
_MESSAGE_CHARS = 300  # a message quotes data (a 50,000-character role): cut likewise

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.ok { color: #2a9d8f; font-weight: bold; } .bad { color: #d62828; font-weight: bold; }
.figures { display: flex; flex-wrap: wrap; gap: 1.5em; }
figure { margin: 0; } figcaption { font-size: 13px; color: #555; }
pre.raw { background: #f6f6f6; padding: 0.5em; font-size: 12px; max-height: 14em; overflow: auto;
          white-space: pre-wrap; word-break: break-word; margin: 0.2em 0; text-align: left; }
.row { border: 1px solid #e3e3e3; padding: 0.4em 0.8em; margin: 0.8em 0; }
.muted { color: #777; font-size: 13px; }
"""


# ---------------------------------------------------------------------------- reading the folder


def json_objects(path: Path) -> Iterator[dict]:
    """The JSON objects of a JSONL file, streamed; a line that is not one is skipped (the page shows,
    it does not judge: verify and prepare own those files' rules)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def reject_examples(path: Path, per_code: int = EXAMPLES_PER_CODE) -> dict[str, list[dict]]:
    """The first ``per_code`` lines of ``rejects.jsonl`` for each code."""
    out: dict[str, list[dict]] = {}
    for entry in json_objects(path):
        examples = out.setdefault(str(entry.get("code")), [])
        if len(examples) < per_code:
            examples.append(entry)
    return out


def violations_by_row(path: Path, positions: set[int]) -> dict[int, list[str]]:
    """``rule: message`` of every violation verify recorded for the rows at ``positions``."""
    out: dict[int, list[str]] = {}
    for entry in json_objects(path) if positions else ():
        if isinstance(entry.get("row"), int) and entry["row"] in positions:
            out.setdefault(entry["row"], []).append(cut(f"{entry.get('rule')}: {entry.get('message')}",
                                                         _MESSAGE_CHARS, VIOLATIONS_FILE))
    return out


def _columns(directory: Path) -> tuple[list[int], list[int], list[str]]:
    """(num_tokens, num_trained, source) of every row, from the dataset's columns (no row decoded)."""
    from beam_sft.dataset_folder.arrow_dataset import small_columns
    from beam_sft.verify.folder import open_prepared

    open_prepared(directory)  # (what it is not, said as verify says it)
    # The three columns straight from the Arrow files: through the dataset's formatting, Python
    # lists of 10,000 rows took 0.3 s to 1.1 s of CPU, on the critical path of every prepare.
    lengths: list[int] = []
    trained: list[int] = []
    sources: list[str] = []
    for table in small_columns(directory, ["num_tokens", "num_trained", "source"]):
        lengths += table.column(0).to_pylist()
        trained += table.column(1).to_pylist()
        sources += table.column(2).to_pylist()
    return lengths, trained, sources


def sample_positions(sources: Sequence[str], count: int = SAMPLE_ROWS, seed: int = 0) -> list[int]:
    """Rows to draw: the first row of each source, then seeded others, ``count`` at most, in order.

    >>> chosen = sample_positions(["a", "a", "b", "b", "b"], count=3)
    >>> len(chosen), chosen[:1], 2 in chosen
    (3, [0], True)
    """
    chosen: list[int] = []
    seen: set[str] = set()
    for i, source in enumerate(sources):
        if source not in seen and len(chosen) < count:
            seen.add(source)
            chosen.append(i)
    rest = [i for i in range(len(sources)) if i not in set(chosen)]
    random.Random(seed).shuffle(rest)
    chosen += rest[: max(0, count - len(chosen))]
    return sorted(chosen)


# ---------------------------------------------------------------------------- drawing


def histogram(values: Sequence[float], bins: int, low: float, high: float) -> list[int]:
    """Counts of ``values`` in ``bins`` equal bins over [low, high] (the last bin closed).

    >>> histogram([0, 1, 2, 3, 4], 2, 0, 4)
    [2, 3]
    """
    counts = [0] * bins
    width = (high - low) / bins if high > low else 1.0
    for v in values:
        counts[min(bins - 1, max(0, int((v - low) / width)))] += 1
    return counts


def svg_bars(counts: Sequence[int], low: float, high: float, *, title: str, x_label: str,
             width: int = 460, height: int = 220, color: str = "#2a9d8f") -> str:
    """A bar chart as inline SVG: ``counts`` over equal bins from ``low`` to ``high``."""
    left, bottom, top, right = 48, 34, 24, 12
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(counts) if counts and max(counts) > 0 else 1
    n = max(1, len(counts))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'class="chart"><title>{escape(title)}</title>',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for i, c in enumerate(counts):
        h = plot_h * c / peak
        x = left + plot_w * i / n
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{max(1.0, plot_w / n - 1):.1f}" '
                     f'height="{h:.1f}" fill="{color}"><title>{c}</title></rect>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#555"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#555"/>')
    for frac in (0.0, 0.5, 1.0):
        x = left + plot_w * frac
        parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 14}" font-size="11" text-anchor="middle">'
                     f'{escape(_num(low + (high - low) * frac))}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + 10}" font-size="11" text-anchor="end">{peak}</text>')
    parts.append(f'<text x="{left - 6}" y="{top + plot_h}" font-size="11" text-anchor="end">0</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" font-size="12" text-anchor="middle">'
                 f'{escape(x_label)}</text></svg>')
    return "".join(parts)


def svg_shares(shares: Mapping[str, float], *, title: str, width: int = 460) -> str:
    """Horizontal bars, one per name, of shares in [0, 1]."""
    row_h, left, top = 24, 90, 26
    height = top + row_h * max(1, len(shares)) + 8
    plot_w = width - left - 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'class="chart"><title>{escape(title)}</title>',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
             f'<text x="8" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    for i, (name, share) in enumerate(shares.items()):
        y = top + i * row_h
        w = plot_w * max(0.0, min(1.0, float(share)))
        parts.append(f'<text x="{left - 6}" y="{y + 15}" font-size="12" text-anchor="end">{escape(str(name))}</text>')
        parts.append(f'<rect class="bar" x="{left}" y="{y + 3}" width="{max(w, 0.5):.1f}" height="{row_h - 8}" '
                     f'fill="#e76f51"/>')
        parts.append(f'<text x="{left + w + 6:.1f}" y="{y + 15}" font-size="12">{share:.1%}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, left: int | frozenset[int] = 1,
          cls: str = "") -> str:
    """An HTML table; the first ``left`` columns (or those numbered in it) left-aligned; every cell escaped."""
    def cell(tag: str, i: int, value: Any) -> str:
        align = ' class="l"' if (i in left if isinstance(left, frozenset) else i < left) else ""
        return f"<{tag}{align}>{escape(_num(value))}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f'<table class="{escape(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _raw(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return f'<pre class="raw">{escape(cut(text, _RAW_CHARS, REJECTS_FILE), quote=False)}</pre>'


# ---------------------------------------------------------------------------- sections


def _sources_section(report: dict) -> str:
    tokens_by_source = (report.get("tokens") or {}).get("by_source") or {}
    rows = []
    for name, entry in (report.get("sources") or {}).items():
        if not isinstance(entry, dict):
            continue
        tokens = tokens_by_source.get(name) or {}
        total, trained = tokens.get("tokens", 0), tokens.get("trained", 0)
        rejected = sum((entry.get("rejected") or {}).values())
        rows.append([name, entry.get("format", ""), entry.get("read", 0), entry.get("kept", 0), rejected,
                     entry.get("rows_out", 0), total, trained, f"{trained / total:.1%}" if total else "-"])
    return ("<h2>Sources</h2>" + table(["source", "format", "read", "kept", "rejected", "rows out", "tokens",
                                        "trained tokens", "trained"], rows, left=2, cls="sources"))


def _rejects_section(report: dict, examples: dict[str, list[dict]]) -> str:
    from beam_sft.reject_codes import REASONS

    by_code = (report.get("rejects") or {}).get("by_code") or {}
    dropped = (report.get("length_policy") or {}).get("dropped_too_long", 0)
    parts = [f"<h2>Rejected rows ({_num(sum(by_code.values()))})</h2>"]
    if not by_code:
        parts.append('<p class="ok">no row was rejected</p>')
        return "".join(parts)
    parts.append(table(["code", "rows", "meaning"],
                       [[code, n, REASONS[code].meaning if code in REASONS else "(not in the reason table)"]
                        for code, n in sorted(by_code.items(), key=lambda kv: (-kv[1], kv[0]))],
                       left=frozenset({0, 2}), cls="rejects"))
    if dropped:
        parts.append(f'<p class="muted">{escape(_num(dropped))} of them dropped by the length policy</p>')
    for code in sorted(by_code, key=lambda c: (-by_code[c], c)):
        shown = examples.get(code) or []
        parts.append(f"<h3>{escape(code)} <span class=\"muted\">({len(shown)} of {by_code[code]} shown)</span></h3>")
        for entry in shown:
            where = f"{entry.get('source')} row {entry.get('row')}"
            message = cut(str(entry.get("message")), _MESSAGE_CHARS, REJECTS_FILE)
            parts.append(f'<div class="reject"><div><b>{escape(where)}</b>: {escape(message)}'
                         f"</div>{_raw(entry.get('raw'))}</div>")
    return "".join(parts)


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


def _figures_section(report: dict, lengths: Sequence[int], trained: Sequence[int]) -> str:
    longest = max(lengths) if lengths else 1
    fractions = [t / n if n else 0.0 for t, n in zip(trained, lengths, strict=True)]
    charts = [
        svg_bars(histogram(lengths, 30, 0, longest), 0, longest, title="Row length (tokens)", x_label="tokens"),
        svg_bars(histogram(fractions, 20, 0.0, 1.0), 0.0, 1.0, title="Trained fraction per row",
                 x_label="trained tokens / tokens", color="#264653"),
    ]
    channels = channel_fractions((report.get("verify") or {}).get("trained_by_channel"))
    if channels:
        charts.append(svg_shares(channels, title="Trained tokens by channel"))
    return ('<h2>Lengths and masks</h2><div class="figures">'
            + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>")


def _tokens_section(report: dict) -> str:
    tokens = report.get("tokens") or {}
    length = tokens.get("length") or {}
    rows = [["rows", tokens.get("rows", 0)], ["tokens", tokens.get("total", 0)],
            ["trained tokens", tokens.get("trained", 0)], ["trained fraction", tokens.get("trained_fraction", 0.0)]]
    rows += [[f"length {k}", length[k]] for k in ("min", "p50", "p90", "p99", "max", "mean") if k in length]
    policy = report.get("length_policy") or {}
    if "max_length" in policy:
        rows.append(["max_length", policy["max_length"]])
    return "<h2>Tokens</h2>" + table(["figure", "value"], rows, cls="tokens")


def _verify_section(report: dict) -> str:
    section = report.get("verify")
    if not isinstance(section, dict):
        return '<h2>Verify</h2><p class="bad">not verified (run <code>beam-sft verify</code>)</p>'
    violations = section.get("violations") or {}
    verdict = ('<p class="ok">every rule holds on every checked row</p>' if section.get("ok")
               else f'<p class="bad">{escape(_num(violations.get("total", 0)))} violation(s) in '
                    f'{escape(_num(violations.get("rows", 0)))} row(s)</p>')
    rows = [["rows checked", f"{_num(section.get('rows_checked', 0))} of {_num(section.get('rows', 0))}"],
            ["parser", section.get("parser", "")], ["decoder", section.get("decoder", "")]]
    by_rule = violations.get("by_rule") or {}
    parts = ["<h2>Verify</h2>", verdict, table(["check", "result"], rows, cls="verify")]
    if by_rule:
        parts.append(table(["rule", "violations"], sorted(by_rule.items()), cls="violations"))
    coverage = section.get("coverage") or {}
    if coverage.get("every_row"):
        parts.append(f'<p class="muted">rules on every row: {escape(", ".join(map(str, coverage["every_row"])))}</p>')
    return "".join(parts)


def _rows_section(directory: Path, positions: Sequence[int], env=None) -> str:
    from beam_sft.verify.api import load_rows, row_view
    from beam_sft.verify.view_html import row_blocks

    if not positions:
        return ""
    contexts, env = load_rows(directory, positions, check=False, env=env)  # verify's findings are in its file
    flagged = violations_by_row(directory / VIOLATIONS_FILE, set(positions))
    parts = ['<h2>Rows and their masks</h2><p class="legend"><span class="tok trained">trained</span> '
             '<span class="tok ctx">context</span> (as <code>beam-sft inspect --html</code> draws them; '
             "hover a token for its index and id)</p>"]
    for ctx in contexts:
        texts, raw = row_view(ctx, env)
        trained = sum(1 for m in ctx.mask if m)
        meta = f"row {ctx.position} · source {ctx.source} · row_index {ctx.row_index} · tokens {len(ctx.ids)} · trained {trained}"
        found = flagged.get(ctx.position) or []
        flag = (f' <span class="bad">verify: {escape("; ".join(found))}</span>' if found else "")
        parts.append(f'<div class="row"><div class="muted">{escape(meta)}{flag}</div>'
                     + "".join(row_blocks(ctx, texts, raw)) + "</div>")
    return "".join(parts)


# ---------------------------------------------------------------------------- the page


def _sealed_report(directory: Path) -> dict:
    """report.json, its seal checked first as verify checks it: a page drawn from an edited report would
    show the edit as the folder's figures (and an edited value of the wrong type would end in a
    traceback). One line naming the file instead."""
    from beam_sft.dataset_folder.report_json import read_report, seal_problem

    report = read_report(directory)
    if report is None:
        raise PreparedError(directory / REPORT_FILE, "missing or not a JSON object: not a prepared folder")
    problem = seal_problem(report)
    if problem is not None:
        raise PreparedError(directory / REPORT_FILE, f"{problem}; no page is drawn from it (prepare again)")
    return report


def _field(section: Any, key: str) -> str:
    """``section[key]`` as text when ``section`` is a mapping, else "?"."""
    return str(section.get(key, "?")) if isinstance(section, Mapping) else "?"


def _drawn(heading: str, section, report: dict, *args) -> str:
    """One section of the page; a report value of the wrong type (a sealed report written by other
    code, or the API called on an unchecked dict) draws a line saying so, never a traceback."""
    try:
        return section(report, *args)
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
        return (f'<h2>{escape(heading)}</h2><p class="bad">report.json holds values of the wrong type for this '
                "section; it is not drawn (run <code>beam-sft verify</code>)</p>")


def render_report_page(directory: str | Path, *, sample_rows: int = SAMPLE_ROWS, seed: int = 0,
                       shown_as: str | Path | None = None, env=None) -> str:
    """The page for the prepared folder at ``directory``, as a string; ``shown_as``: the path the page
    names (prepare draws it in the staging folder, for the folder it publishes); ``env``: the CheckEnv
    verify just checked the folder with (``VerifyResult.env``), reused to draw the rows."""
    from beam_sft.verify.view_html import STYLE as ROW_STYLE

    directory = Path(directory)
    named = Path(shown_as) if shown_as is not None else directory
    lengths, trained, sources = _columns(directory)
    report = _sealed_report(directory)
    positions = sample_positions(sources, sample_rows, seed)
    title = f"beam-sft report: {named.name}"
    verify = report.get("verify") if isinstance(report.get("verify"), dict) else None
    verdict = ("verified" if verify and verify.get("ok") else "verification failed" if verify else "not verified")
    meta = (f"{named} · {len(lengths):,} rows · fingerprint {str(report.get('fingerprint', '?'))[:16]} · "
            f"encoder {_field(report.get('encoder'), 'name')} · {verdict}")
    return "\n".join([
        page_head(title, ROW_STYLE + STYLE),  # the one head: no network, no script (page_head's policy)
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{escape(meta)}</p>',
        _drawn("Sources", _sources_section, report),
        _drawn("Tokens", _tokens_section, report),
        _drawn("Lengths and masks", _figures_section, report, lengths, trained),
        _drawn("Verify", _verify_section, report),
        _drawn("Rejected rows", _rejects_section, report, reject_examples(directory / REJECTS_FILE)),
        _rows_section(directory, positions, env),
        "</body></html>",
        "",
    ])


def write_report_page(directory: str | Path, out: str | Path | None = None, **kwargs) -> Path:
    """Write the page (default: ``DIR/report.html``) and return its path."""

    path = Path(out) if out is not None else Path(directory) / REPORT_PAGE
    page = render_report_page(directory, **kwargs)
    tmp = path.with_name(f".{path.name}.tmp")  # dot-named: never taken for a folder file
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise BeamError(f"{path}: cannot write the report page ({exc.strerror or exc})") from exc
    return path
