"""The one head of every HTML page beam-sft writes (``report``, ``inspect --html``): the charset, the
Content-Security-Policy and the title, so no page can be written without the policy.

The policy: nothing loads from anywhere (``default-src 'none'``), no script runs (none is allowed),
inline style only, images only from ``data:`` URLs; no form posts, no frames, no ``<base>``. A hostile
string that escaped the escaping would still be inert. ``frame-ancestors`` is left out: a browser ignores
it in a ``<meta>`` policy and says so on the console (Chromium does), and these pages are files, never
served with headers; ``default-src 'none'`` already stops the page from framing anything.
"""

from __future__ import annotations

from beam_sft.visible import html_text as escape  # html.escape, then controls shown

CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                           "base-uri 'none'; form-action 'none'")


def page_head(title: str, style: str) -> str:
    """``<!DOCTYPE html>`` up to ``<body>``: the policy first (before anything that could load), then the
    escaped title and the page's own style sheet (ours, never data)."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY, quote=True)}">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{escape(title)}</title><style>{style}</style></head><body>",
    ])
