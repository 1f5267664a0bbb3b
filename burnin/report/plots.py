"""Inline SVG plots for report.html, drawn in Python: no JavaScript library, no network.

Two kinds:

* :func:`strip_plot`: one value per node (or per pair, per rail) in name
  order, the topology's bounds, the run's median and straggler line drawn
  across, failing nodes in red and outliers ringed and named. Passing points
  of a large fleet are one ``<path>``, so 1,024 nodes cost a few kilobytes.
* :func:`curve_plot`: y against x per node (busbw against message size,
  a soak's temperature against time). Beyond a few dozen curves the healthy
  ones fold into their median and min-max band; the marked ones stay drawn.

Every text drawn (node names, labels) is made printable and HTML-escaped
here, so the :class:`Rendered` result can go into the page as is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from burnin.report.series import Line, Point
from burnin.text import printable


class Rendered(Markup):
    """Markup that report code built and escaped itself (SVG, the page's script): shown untouched."""

    __slots__ = ()


WIDTH, HEIGHT = 640, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 112, 16, 36
MAX_LABELS = 12
CHAR_WIDTH = 6.2  # px per character of an 11 px label, for placing labels apart
LABEL_HEIGHT = 12.0
MAX_POINT_ELEMENTS = 200  # above this, passing points are one path without tooltips
MAX_CURVES = 24  # above this, unmarked curves fold into a median and a band

COLORS = {"fail": "#c62828", "incomplete": "#ef6c00", "not-applicable": "#9e9e9e", "pass": "#3f6ea5",
          "": "#3f6ea5"}
LINE_STYLE = {"bound": ("#c62828", "6 4"), "straggler": ("#ef6c00", "3 3"), "median": ("#757575", "1 3")}
SEVERITY = {"fail": 0, "incomplete": 1}


def text(value: object) -> str:
    """``value`` made safe for SVG text or an attribute: control characters shown, ``<>&"'`` escaped."""
    return str(escape(printable(value)))


def number_text(value: float) -> str:
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def nice_ticks(low: float, high: float, target: int = 5, *, integral: bool = False) -> list[float]:
    """Round tick values covering ``[low, high]`` (steps of 1, 2 or 5 times a power of ten)."""
    raw = (high - low) / max(target, 1)
    if raw <= 0 or not math.isfinite(raw):
        return [low]
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integral:
        step = max(step, 1.0)
    first = math.ceil(low / step) * step
    count = int((high - first) / step + 1e-9) + 1
    return [round(first + i * step, 12) for i in range(max(count, 0))]


@dataclass(frozen=True, slots=True)
class _Scale:
    low: float
    high: float
    top: float
    bottom: float

    def __call__(self, value: float) -> float:
        return self.bottom - (value - self.low) / (self.high - self.low) * (self.bottom - self.top)


@dataclass(frozen=True, slots=True)
class _XScale:
    low: float
    high: float
    left: float
    right: float

    def __call__(self, value: float) -> float:
        return self.left + (value - self.low) / (self.high - self.low) * (self.right - self.left)


def _y_scale(values: Sequence[float], top: float, bottom: float) -> _Scale:
    low, high = min(values), max(values)
    if low == high:
        span = max(abs(low) * 0.1, 1.0)
        low, high = (low, low + span) if low == 0 else (low - span, high + span)
    pad = (high - low) * 0.06
    return _Scale(low - pad, high + pad, top, bottom)


def _svg_open(label: str, width: int = WIDTH, height: int = HEIGHT) -> list[str]:
    return [f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="{text(label)}" xmlns="http://www.w3.org/2000/svg">',
            f'<rect x="{LEFT}" y="{TOP}" width="{width - LEFT - RIGHT}" height="{height - TOP - BOTTOM}" '
            'fill="#fafafa" stroke="#ddd"/>']


def _y_axis(scale: _Scale, unit: str, width: int, integral: bool) -> list[str]:
    parts = []
    for tick in nice_ticks(scale.low, scale.high, integral=integral):
        y = scale(tick)
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>'
                     f'<text x="{LEFT - 6}" y="{y + 3.5:.1f}" text-anchor="end" class="tick">'
                     f"{number_text(tick)}</text>")
    parts.append(f'<text x="{LEFT - 6}" y="{TOP - 5}" text-anchor="end" class="unit">{text(unit)}</text>')
    return parts


def _spread_labels(wanted: list[float], gap: float, low: float, high: float) -> list[float]:
    """Label positions near ``wanted`` (sorted by the caller's order) at least ``gap`` apart, within bounds."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    placed = [0.0] * len(wanted)
    last = -math.inf
    for i in order:
        placed[i] = max(wanted[i], last + gap, low)
        last = placed[i]
    overflow = max((placed[i] - high for i in order), default=0.0)
    if overflow > 0:
        placed = [p - overflow for p in placed]
    return placed


def _lines(lines: Sequence[Line], scale: _Scale, width: int) -> list[str]:
    parts = []
    ys = [scale(line.value) for line in lines]
    label_ys = _spread_labels(ys, 11.0, TOP + 4, HEIGHT - BOTTOM + 10)
    for line, y, label_y in zip(lines, ys, label_ys, strict=True):
        color, dash = LINE_STYLE.get(line.kind, LINE_STYLE["median"])
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" '
                     f'stroke-width="1.3" stroke-dasharray="{dash}" class="ref {line.kind}"/>'
                     f'<text x="{width - RIGHT + 5}" y="{label_y + 3.5:.1f}" fill="{color}" class="ref-label">'
                     f"{text(line.label)}</text>")
    return parts


def _marked(point: Point) -> bool:
    return point.outlier or point.status in ("fail", "incomplete")


def _point_title(point: Point, unit: str) -> str:
    state = point.status or "no verdict"
    extra = ", stands out" if point.outlier else ""
    return text(f"{point.label}: {number_text(point.value)} {unit} ({state}{extra})")


def strip_plot(label: str, points: Sequence[Point], lines: Sequence[Line], unit: str,
               order: str = "in name order") -> Rendered:
    """Values in the order given (node names), with ``lines`` across and marked points named."""
    width = WIDTH
    scale = _y_scale([p.value for p in points] + [line.value for line in lines], TOP, HEIGHT - BOTTOM)
    integral = all(float(v).is_integer() for v in [p.value for p in points] + [line.value for line in lines])
    parts = _svg_open(label)
    parts += _y_axis(scale, unit, width, integral)
    parts += _lines(lines, scale, width)
    span = width - LEFT - RIGHT
    xs = [LEFT + (i + 0.5) / len(points) * span for i in range(len(points))]
    plain = [(x, p) for x, p in zip(xs, points, strict=True) if not _marked(p)]
    if len(points) > MAX_POINT_ELEMENTS:
        path = "".join(f"M{x:.1f} {scale(p.value):.1f}h0" for x, p in plain)
        parts.append(f'<path d="{path}" stroke="{COLORS["pass"]}" stroke-opacity="0.7" stroke-width="4" '
                     'stroke-linecap="round" fill="none" class="points"/>')
    else:
        parts += [f'<circle cx="{x:.1f}" cy="{scale(p.value):.1f}" r="3.2" fill="{COLORS.get(p.status, "#3f6ea5")}" '
                  f'fill-opacity="0.8" class="point"><title>{_point_title(p, unit)}</title></circle>'
                  for x, p in plain]
    marked = sorted(((x, p) for x, p in zip(xs, points, strict=True) if _marked(p)),
                    key=lambda xp: (SEVERITY.get(xp[1].status, 2), xp[1].label))
    # the marked points themselves are obstacles for the labels
    placed: list[tuple[float, float, float]] = [(x - 5, x + 5, scale(p.value)) for x, p in marked[:MAX_LABELS]]
    for rank, (x, p) in enumerate(marked):
        y = scale(p.value)
        color = COLORS.get(p.status, COLORS["pass"])
        ring = f' stroke="{COLORS["incomplete"]}" stroke-width="2"' if p.outlier else ""
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.6" fill="{color}"{ring} class="point marked">'
                     f"<title>{_point_title(p, unit)}</title></circle>")
        if rank < MAX_LABELS:
            label_width = CHAR_WIDTH * len(p.label)
            right_side = x + 7 + label_width <= width - RIGHT
            left = x + 7 if right_side else x - 7 - label_width
            label_y = _free_row(placed, left, left + label_width, y, TOP + 10, HEIGHT - BOTTOM - 2)
            placed.append((left, left + label_width, label_y))
            anchor, dx = ("start", 7) if right_side else ("end", -7)
            parts.append(f'<text x="{x + dx:.1f}" y="{label_y + 3.5:.1f}" text-anchor="{anchor}" fill="{color}" '
                         f'class="point-label">{text(p.label)}</text>')
    if len(marked) > MAX_LABELS:
        parts.append(f'<text x="{width - RIGHT}" y="{TOP + 12}" text-anchor="end" class="tick">'
                     f"+{len(marked) - MAX_LABELS} more marked</text>")
    parts += _x_axis([p.label for p in points], xs, width, order)
    parts.append("</svg>")
    return Rendered("".join(parts))


def _free_row(placed: Sequence[tuple[float, float, float]], left: float, right: float, y: float,
              top: float, bottom: float) -> float:
    """A label height near ``y`` where a label spanning ``left..right`` overlaps none already placed."""
    def clear(candidate: float) -> bool:
        return all(end < left or start > right or abs(candidate - row) >= LABEL_HEIGHT
                   for start, end, row in placed)

    for step in range(12):
        for candidate in (y + step * LABEL_HEIGHT, y - step * LABEL_HEIGHT):
            if top <= candidate <= bottom and clear(candidate):
                return candidate
    return y


def _x_axis(labels: Sequence[str], xs: Sequence[float], width: int, order: str) -> list[str]:
    base = HEIGHT - BOTTOM
    slot = (width - LEFT - RIGHT) / max(len(labels), 1)
    if len(labels) <= 16 and max(len(name) for name in labels) * CHAR_WIDTH + 6 <= slot:
        return [f'<text x="{x:.1f}" y="{base + 14}" text-anchor="middle" class="tick">{text(name)}</text>'
                for x, name in zip(xs, labels, strict=True)]
    middle = (LEFT + width - RIGHT) / 2
    return [f'<text x="{LEFT}" y="{base + 14}" class="tick">{text(labels[0])}</text>',
            f'<text x="{width - RIGHT}" y="{base + 14}" text-anchor="end" class="tick">{text(labels[-1])}</text>',
            f'<text x="{middle:.1f}" y="{base + 28}" text-anchor="middle" class="tick">'
            f"{len(labels)} {text(order)}</text>"]


@dataclass(frozen=True, slots=True)
class Curve:
    label: str
    status: str
    points: tuple[tuple[float, float], ...]
    marked: bool = False


def _x_ticks(low: float, high: float, log2: bool) -> list[tuple[float, str]]:
    if not log2:
        return [(t, number_text(t)) for t in nice_ticks(low, high)]
    first, last = math.ceil(low), math.floor(high)
    step = max(1, math.ceil((last - first + 1) / 6))
    return [(float(e), _bytes(2.0 ** e)) for e in range(first, last + 1, step)]


def _bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024:
            return f"{size:g} {unit}"
        size /= 1024
    return f"{size:g} PiB"


def _polyline(points: Sequence[tuple[float, float]], color: str, width: float, opacity: float) -> str:
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return (f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="{width}" '
            f'stroke-opacity="{opacity}" stroke-linejoin="round"/>')


def _band(curves: Sequence[Curve], scale_x: _XScale, scale_y: _Scale) -> list[str]:
    """The median and min-max envelope of ``curves`` at each x any of them has."""
    by_x: dict[float, list[float]] = {}
    for curve in curves:
        for x, y in curve.points:
            by_x.setdefault(x, []).append(y)
    xs = sorted(by_x)
    if not xs:
        return []
    lows = [(scale_x(x), scale_y(min(by_x[x]))) for x in xs]
    highs = [(scale_x(x), scale_y(max(by_x[x]))) for x in reversed(xs)]
    middle = [(scale_x(x), scale_y(sorted(by_x[x])[len(by_x[x]) // 2])) for x in xs]
    area = " ".join(f"{x:.1f},{y:.1f}" for x, y in lows + highs)
    return [f'<polygon points="{area}" fill="{COLORS["pass"]}" fill-opacity="0.18" stroke="none"/>',
            _polyline(middle, COLORS["pass"], 1.8, 0.9)]


def curve_plot(label: str, curves: Sequence[Curve], unit: str, *, x_unit: str = "",
               log2_x: bool = False, lines: Sequence[Line] = ()) -> Rendered:
    """One polyline per curve; beyond :data:`MAX_CURVES` the unmarked ones become a median and a band."""
    width = WIDTH
    xform = (lambda v: math.log2(v)) if log2_x else (lambda v: v)
    plotted = [Curve(c.label, c.status, tuple((xform(x), y) for x, y in c.points if not log2_x or x > 0), c.marked)
               for c in curves]
    plotted = [c for c in plotted if c.points]
    xs = [x for c in plotted for x, _ in c.points] or [0.0, 1.0]
    ys = [y for c in plotted for _, y in c.points] + [line.value for line in lines] or [0.0, 1.0]
    scale_y = _y_scale(ys, TOP, HEIGHT - BOTTOM)
    low_x, high_x = min(xs), max(xs)
    if low_x == high_x:
        high_x = low_x + 1
    scale_x = _XScale(low_x, high_x, LEFT, width - RIGHT)
    parts = _svg_open(label)
    parts += _y_axis(scale_y, unit, width, integral=False)
    for value, tick in _x_ticks(low_x, high_x, log2_x):
        parts.append(f'<text x="{scale_x(value):.1f}" y="{HEIGHT - BOTTOM + 14}" text-anchor="middle" '
                     f'class="tick">{text(tick)}</text>')
    if x_unit:
        parts.append(f'<text x="{width - RIGHT}" y="{HEIGHT - BOTTOM + 28}" text-anchor="end" class="unit">'
                     f"{text(x_unit)}</text>")
    parts += _lines(lines, scale_y, width)
    plain = [c for c in plotted if not c.marked]
    if len(plotted) > MAX_CURVES:
        parts += _band(plain, scale_x, scale_y)
    else:
        parts += [_polyline([(scale_x(x), scale_y(y)) for x, y in c.points], COLORS["pass"], 1.2, 0.55)
                  for c in plain]
    marked = [c for c in plotted if c.marked]
    for rank, curve in enumerate(marked):
        color = COLORS.get(curve.status, COLORS["incomplete"])
        if color == COLORS["pass"]:
            color = COLORS["incomplete"]
        points = [(scale_x(x), scale_y(y)) for x, y in curve.points]
        parts.append(_polyline(points, color, 2.2, 0.95))
        if rank < MAX_LABELS:
            end_x, end_y = points[-1]
            parts.append(f'<text x="{end_x - 4:.1f}" y="{end_y - 5:.1f}" text-anchor="end" fill="{color}" '
                         f'class="point-label">{text(curve.label)}</text>')
    parts.append("</svg>")
    return Rendered("".join(parts))
