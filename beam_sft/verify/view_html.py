"""``inspect --html``: a standalone page with the terminal view's colours, token ids on hover, and
the source row beside it. Every token is one ``<span class="tok">`` carrying ``data-i`` (index)
and ``data-id`` (token id), so the page can be checked mechanically.

Text from the row is escaped as markup and its control and bidi characters are shown as escapes
(``visible.html_text``): an override in a row would otherwise reverse the tokens after it. Markers
are also isolated, left to right, whatever the text around them. Tokens are not isolated one by one:
that would lay a right-to-left sentence out token by token, left to right."""

from __future__ import annotations

from collections.abc import Sequence

from beam_sft.harmony import markers
from beam_sft.verify.context import RowContext, Violation
from beam_sft.verify.page_head import page_head
from beam_sft.verify.view_terminal import provenance_lines, segments
from beam_sft.visible import html_text as escape  # html.escape, then controls shown
from beam_sft.visible import json_visible

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
.layout { display: flex; gap: 1.5em; align-items: flex-start; }
.tokens { flex: 3; min-width: 0; }
.source { flex: 2; min-width: 0; position: sticky; top: 0; }
.source pre { background: #f6f6f6; padding: 0.8em; overflow: auto; max-height: 90vh; font-size: 12px; }
.msg { border-left: 4px solid #ccc; margin: 0.4em 0; padding: 0.2em 0.6em; }
.msg.role-assistant { border-color: #2a9d8f; }
.msg.role-tool { border-color: #9b5de5; }
.msg.role-unknown { border-color: #d62828; }
.label { font-weight: bold; font-size: 12px; color: #555; }
.body { font-family: ui-monospace, monospace; font-size: 13px; white-space: pre-wrap; word-break: break-word; }
.tok.ctx { color: #999; }
.tok.trained { background: #b7f5c4; color: #000; }
.tok.marker { font-weight: bold; unicode-bidi: isolate; direction: ltr; }
.tok:hover { outline: 1px solid #e76f51; }
.legend span { padding: 0 0.4em; }
.violations { color: #d62828; }
.ok { color: #2a9d8f; }
"""


def _token_span(index: int, token_id: int, text: str, trained: bool, raw: str) -> str:
    classes = ["tok", "trained" if trained else "ctx"]
    if raw in markers.ALL_MARKERS:
        classes.append("marker")
    title = f"#{index} id {token_id} {raw!r}" + (" (trained)" if trained else "")
    return (f'<span class="{" ".join(classes)}" data-i="{index}" data-id="{token_id}" '
            f'title="{escape(title, quote=True)}">{escape(text, quote=False)}</span>')


def row_blocks(ctx: RowContext, texts: list[str], raw_tokens: list[str]) -> list[str]:
    """One ``<div class="msg">`` per message of the row, its tokens coloured by mask (the report page
    draws rows with these too)."""
    mask = ctx.mask if len(ctx.mask) == len(ctx.ids) else [0] * len(ctx.ids)
    blocks = []
    for segment in segments(ctx):
        spans = "".join(_token_span(i, ctx.ids[i], texts[i], bool(mask[i]), raw_tokens[i])
                        for i in range(segment.start, segment.end))
        blocks.append(f'<div class="msg role-{escape(segment.role)}"><div class="label">'
                      f'[{escape(segment.label)}]</div><div class="body">{spans}</div></div>')
    return blocks


def render_html(ctx: RowContext, texts: list[str], raw_tokens: list[str],
                violations: Sequence[Violation] = ()) -> str:
    """The page as a string. ``raw_tokens`` are the vocabulary strings shown on hover."""
    mask = ctx.mask if len(ctx.mask) == len(ctx.ids) else [0] * len(ctx.ids)
    trained = sum(1 for m in mask if m)
    blocks = row_blocks(ctx, texts, raw_tokens)
    found = "".join(f"<li><code>{escape(v.rule)}</code> {escape(v.message)}</li>" for v in violations)
    verdict = (f'<ul class="violations">{found}</ul>' if violations
               else '<p class="ok">no violations in this row</p>')
    # (still JSON: the characters escaped are written as JSON escapes, so the pane reads back as the row)
    source = json_visible(ctx.row, indent=2) if ctx.row is not None else str(ctx.row_error)
    title = f"beam-sft inspect: row {ctx.position}"
    meta = (f"source {ctx.source} · row_index {ctx.row_index} · tokens {len(ctx.ids)} · "
            f"trained {trained}")
    return "\n".join([
        page_head(title, STYLE),  # the one head, with the Content-Security-Policy every page has
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">{escape(meta)}</p>',
        *(f'<p class="meta">{escape(line)}</p>' for line in provenance_lines(ctx.row)),
        '<p class="legend"><span class="tok trained">trained</span><span class="tok ctx">context</span>'
        " hover a token for its index and id</p>",
        verdict,
        '<div class="layout"><div class="tokens">',
        *blocks,
        '</div><div class="source"><h2>source row</h2>',
        f"<pre>{escape(source, quote=False)}</pre>",
        "</div></div></body></html>",
        "",
    ])
