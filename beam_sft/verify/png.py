"""report_lengths.png drawn with numpy and zlib: two bar charts (row lengths, trained fraction per row)
with axes, ticks and labels in a built-in 5x7 pixel font.

Importing and running matplotlib costs verify about a third of a second, which on 10,000 rows is
a sixth of the whole proof; this costs milliseconds and needs no optional package. The picture is
a plain RGB PNG (one IDAT chunk, filter 0 on every line).
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

WIDTH, HEIGHT = 1000, 350
SCALE = 2  # font pixels per glyph pixel
BACKGROUND = (255, 255, 255)
INK = (34, 34, 34)
GRID = (225, 225, 225)

_FONT_ROWS = {
    "0": ".###.|#...#|#..##|#.#.#|##..#|#...#|.###.", "1": "..#..|.##..|..#..|..#..|..#..|..#..|.###.",
    "2": ".###.|#...#|....#|...#.|..#..|.#...|#####", "3": "#####|...#.|..#..|...#.|....#|#...#|.###.",
    "4": "...#.|..##.|.#.#.|#..#.|#####|...#.|...#.", "5": "#####|#....|####.|....#|....#|#...#|.###.",
    "6": "..##.|.#...|#....|####.|#...#|#...#|.###.", "7": "#####|....#|...#.|..#..|.#...|.#...|.#...",
    "8": ".###.|#...#|#...#|.###.|#...#|#...#|.###.", "9": ".###.|#...#|#...#|.####|....#|...#.|.##..",
    "a": ".....|.....|.###.|....#|.####|#...#|.####", "b": "#....|#....|#.##.|##..#|#...#|#...#|####.",
    "c": ".....|.....|.###.|#....|#....|#...#|.###.", "d": "....#|....#|.##.#|#..##|#...#|#...#|.####",
    "e": ".....|.....|.###.|#...#|#####|#....|.###.", "f": "..##.|.#..#|.#...|###..|.#...|.#...|.#...",
    "g": ".....|.####|#...#|#...#|.####|....#|.###.", "h": "#....|#....|#.##.|##..#|#...#|#...#|#...#",
    "i": "..#..|.....|.##..|..#..|..#..|..#..|.###.", "j": "...#.|.....|..##.|...#.|...#.|#..#.|.##..",
    "k": "#....|#....|#..#.|#.#..|##...|#.#..|#..#.", "l": ".##..|..#..|..#..|..#..|..#..|..#..|.###.",
    "m": ".....|.....|##.#.|#.#.#|#.#.#|#...#|#...#", "n": ".....|.....|#.##.|##..#|#...#|#...#|#...#",
    "o": ".....|.....|.###.|#...#|#...#|#...#|.###.", "p": ".....|.....|####.|#...#|####.|#....|#....",
    "q": ".....|.....|.##.#|#..##|.####|....#|....#", "r": ".....|.....|#.##.|##..#|#....|#....|#....",
    "s": ".....|.....|.###.|#....|.###.|....#|####.", "t": ".#...|.#...|###..|.#...|.#...|.#..#|..##.",
    "u": ".....|.....|#...#|#...#|#...#|#..##|.##.#", "v": ".....|.....|#...#|#...#|#...#|.#.#.|..#..",
    "w": ".....|.....|#...#|#...#|#.#.#|#.#.#|.#.#.", "x": ".....|.....|#...#|.#.#.|..#..|.#.#.|#...#",
    "y": ".....|.....|#...#|#...#|.####|....#|.###.", "z": ".....|.....|#####|...#.|..#..|.#...|#####",
    " ": ".....|.....|.....|.....|.....|.....|.....", ".": ".....|.....|.....|.....|.....|.##..|.##..",
    ",": ".....|.....|.....|.....|.##..|..#..|.#...", "/": ".....|....#|...#.|..#..|.#...|#....|.....",
    "(": "...#.|..#..|.#...|.#...|.#...|..#..|...#.", ")": ".#...|..#..|...#.|...#.|...#.|..#..|.#...",
    "-": ".....|.....|.....|#####|.....|.....|.....", "_": ".....|.....|.....|.....|.....|.....|#####",
    "%": "##...|##..#|...#.|..#..|.#...|#..##|...##", ":": ".....|.##..|.##..|.....|.##..|.##..|.....",
    "?": ".###.|#...#|....#|...#.|..#..|.....|..#..",
}
FONT = {c: np.array([[p == "#" for p in row] for row in rows.split("|")], dtype=bool) for c, rows in _FONT_ROWS.items()}
GLYPH_W, GLYPH_H = 6 * SCALE, 7 * SCALE  # advance (5 pixels and a space), height


def text_width(text: str) -> int:
    return len(text) * GLYPH_W


def draw_text(image: np.ndarray, x: int, y: int, text: str, color=INK, *, vertical: bool = False) -> None:
    """``text`` with its top-left corner at (x, y); ``vertical`` writes it bottom to top."""
    for k, char in enumerate(text.lower()):
        glyph = np.kron(FONT.get(char, FONT["?"]), np.ones((SCALE, SCALE), dtype=bool))
        if vertical:
            glyph = np.rot90(glyph)
            gx, gy = x, y - (k + 1) * GLYPH_W
        else:
            gx, gy = x + k * GLYPH_W, y
        h, w = glyph.shape
        if gx < 0 or gy < 0 or gx + w > image.shape[1] or gy + h > image.shape[0]:
            continue
        image[gy:gy + h, gx:gx + w][glyph] = color


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten).

    >>> nice_ticks(0, 100)
    [0, 20, 40, 60, 80, 100]
    >>> nice_ticks(3, 3)
    [3.0]
    """
    if high <= low:
        return [float(low)]
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(s * power for s in (1, 2, 5, 10) if s * power >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]


def _label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def bar_panel(image: np.ndarray, box: tuple[int, int, int, int], edges: np.ndarray, counts: np.ndarray,
              color: tuple[int, int, int], title: str, xlabel: str, ylabel: str | None) -> None:
    """Bars of ``counts`` between ``edges`` in the plot area ``box`` = (left, top, right, bottom)."""
    left, top, right, bottom = box
    width, height = right - left, bottom - top
    x0, x1 = float(edges[0]), float(edges[-1])
    span = x1 - x0 if x1 > x0 else 1.0
    peak = max(1, int(counts.max()) if len(counts) else 1)
    yticks = [t for t in nice_ticks(0, peak, 4) if t <= peak]
    for t in yticks:  # grid lines and y tick labels
        y = bottom - int(round(t / peak * height))
        image[y, left:right] = GRID
        label = _label(t)
        draw_text(image, left - 8 - text_width(label), y - GLYPH_H // 2, label)
    for a, b, n in zip(edges[:-1], edges[1:], counts, strict=True):
        if n <= 0:
            continue
        xa = left + int((a - x0) / span * width)
        xb = max(xa + 1, left + int((b - x0) / span * width))
        ya = bottom - max(1, int(round(n / peak * height)))
        image[ya:bottom, xa:xb] = color
    image[bottom, left:right + 1] = INK  # axes
    image[top:bottom + 1, left] = INK
    for t in nice_ticks(x0, x1, 5):
        x = left + int((t - x0) / span * width)
        image[bottom:bottom + 5, x] = INK
        label = _label(t)
        draw_text(image, x - text_width(label) // 2, bottom + 8, label)
    draw_text(image, left + (width - text_width(xlabel)) // 2, bottom + 14 + GLYPH_H, xlabel)
    draw_text(image, left + (width - text_width(title)) // 2, top - 10 - GLYPH_H, title)
    if ylabel:
        draw_text(image, 4, top + (height + text_width(ylabel)) // 2, ylabel, vertical=True)


def encode_png(image: np.ndarray) -> bytes:
    """An RGB uint8 array (height, width, 3) as PNG bytes."""
    height, width, _ = image.shape
    lines = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # filter byte 0, then the pixels
    lines[:, 1:] = image.reshape(height, 3 * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(lines.tobytes(), 6))
            + chunk(b"IEND", b""))


def lengths_figure(lengths: dict[int, int], fractions: Sequence[int]) -> np.ndarray:
    """The two panels: rows per length (up to 50 bins) and rows per trained-fraction bin."""
    image = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
    image[:] = BACKGROUND
    values = np.array(sorted(lengths), dtype=np.int64)
    weights = np.array([lengths[v] for v in values.tolist()], dtype=np.int64)
    bins = min(50, max(1, len(values)))
    low, high = (int(values[0]), int(values[-1])) if len(values) else (0, 1)
    counts, edges = np.histogram(values, bins=bins, range=(low, high if high > low else low + 1), weights=weights)
    total = int(weights.sum())
    bar_panel(image, (80, 50, 470, 280), edges, counts, (0x44, 0x77, 0xAA), f"row length ({total} rows)",
              "tokens per row", "rows")
    fractions = np.asarray(fractions, dtype=np.int64)
    edges = np.linspace(0.0, 1.0, len(fractions) + 1)
    bar_panel(image, (580, 50, 970, 280), edges, fractions, (0x22, 0x88, 0x33), "trained fraction per row",
              "trained tokens / tokens", None)
    return image


def write_lengths_png(path: Path, lengths: dict[int, int], fractions: Sequence[int]) -> Path:
    """Draw ``lengths_figure`` into ``path`` (written whole: a temporary file, then renamed)."""
    data = encode_png(lengths_figure(dict(lengths), fractions))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path
