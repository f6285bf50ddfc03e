"""Charts as server-rendered SVG: no JavaScript library, no build step, themed by CSS.

Every piece of text that reaches the SVG (labels, series and class names) goes through
``format_html``, so a job class called ``<script>`` is drawn as text, never markup.
Colours come from CSS classes (``wurk-c0`` ...) defined in ``dashboard.css``, which follow
the admin's light and dark themes. Each x position carries a ``<title>`` tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

WIDTH = 960


@dataclass(frozen=True)
class Series:
    name: str
    #: One value per x position; ``None`` where there is none (the first snapshot has no
    #: delta), so charts stacked on one page keep their x positions aligned.
    values: Sequence[float | None]
    #: CSS class picking the colour: ``processed``, ``failed``, or ``c0`` ... ``c5``.
    css: str = "c0"


def compact(value: float) -> str:
    """``1234`` -> ``1.2k``: short axis labels."""
    value = float(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}" if value != int(value) else str(int(value))


def nice_ceiling(value: float) -> float:
    """The top of an axis with four even ticks: 4 x a round step (1, 2, 2.5, 3, 4, 5, 6, 8 x 10^n).

    ``23`` -> ``24`` (ticks 6, 12, 18, 24); anything up to 4 -> ``4`` (whole-number ticks).
    """
    if value <= 4:
        return 4.0
    quarter = value / 4
    exp = 10 ** math.floor(math.log10(quarter))
    for step in (1, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if step * exp >= quarter:
            return float(4 * step * exp)
    return float(40 * exp)  # pragma: no cover - the loop always returns


def _label_indexes(labels: Sequence[str], wanted: int = 6) -> list[int]:
    """Up to ``wanted`` evenly spread x positions to label, never two with the same text
    (snapshots every 30 s labelled by the minute read "12:01 12:01 12:02")."""
    n = len(labels)
    if n <= wanted:
        picked = list(range(n))
    else:
        step = (n - 1) / (wanted - 1)
        picked = sorted({round(i * step) for i in range(wanted)})
    shown: list[int] = []
    for i in picked:
        if not shown or labels[i] != labels[shown[-1]]:
            shown.append(i)
    return shown


def _anchor(i: int, n: int) -> str:
    """Text anchor of an x label: the first and last stay inside the chart."""
    if n > 1 and i == 0:
        return "start"
    return "end" if n > 1 and i == n - 1 else "middle"


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _grid(peak: float, y: Callable[[float], float], left: float, right: float, unit: str) -> SafeString:
    """Five horizontal grid lines with their value labels, shared by the line and bar charts."""
    return format_html_join(
        "",
        '<line class="wurk-grid" x1="{}" x2="{}" y1="{}" y2="{}"></line>'
        '<text class="wurk-axis" x="{}" y="{}" text-anchor="end">{}</text>',
        (
            (
                left,
                WIDTH - right,
                _fmt(y(peak * k / 4)),
                _fmt(y(peak * k / 4)),
                left - 6,
                _fmt(y(peak * k / 4) + 4),
                compact(peak * k / 4) + (unit if k else ""),
            )
            for k in range(5)
        ),
    )


def line_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    *,
    height: int = 220,
    title: str = "",
    unit: str = "",
) -> SafeString:
    """A line chart of ``series`` over the x positions ``labels`` (oldest first)."""
    n = len(labels)
    left, right, top, bottom = 56, 14, 12, 28
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    peak = nice_ceiling(max([v for s in series for v in s.values if v is not None] + [0]))

    def x(i: int) -> float:
        return left + (plot_w / 2 if n <= 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return top + plot_h - plot_h * (v / peak)

    grid = _grid(peak, y, left, right, unit)
    xlabels = format_html_join(
        "",
        '<text class="wurk-axis" x="{}" y="{}" text-anchor="{}">{}</text>',
        ((_fmt(x(i)), height - 8, _anchor(i, n), labels[i]) for i in _label_indexes(labels)),
    )
    lines = []
    for s in series:
        known = [(i, v) for i, v in enumerate(s.values) if v is not None]
        if not known:
            continue
        points = " ".join(f"{_fmt(x(i))},{_fmt(y(v))}" for i, v in known)
        if len(known) == 1:
            lines.append(
                format_html(
                    '<circle class="wurk-dot wurk-{}" cx="{}" cy="{}" r="3"></circle>',
                    s.css,
                    _fmt(x(known[0][0])),
                    _fmt(y(known[0][1])),
                )
            )
        else:
            first, last = known[0][0], known[-1][0]
            area = f"{_fmt(x(first))},{_fmt(y(0))} {points} {_fmt(x(last))},{_fmt(y(0))}"
            lines.append(
                format_html(
                    '<polygon class="wurk-area wurk-{}" points="{}"></polygon>'
                    '<polyline class="wurk-line wurk-{}" points="{}"><title>{}</title></polyline>',
                    s.css,
                    area,
                    s.css,
                    points,
                    s.name,
                )
            )
    column = plot_w / max(n - 1, 1)
    tips = format_html_join(
        "",
        '<rect class="wurk-hit" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
        (
            (
                _fmt(max(x(i) - column / 2, left)),
                top,
                _fmt(column),
                plot_h,
                labels[i] + "\n" + "\n".join(f"{s.name}: {_value(s.values[i])}{unit}" for s in series),
            )
            for i in range(n)
        ),
    )
    return format_html(
        '<svg class="wurk-chart" viewBox="0 0 {} {}" role="img" aria-label="{}" '
        'xmlns="http://www.w3.org/2000/svg">{}{}{}{}</svg>',
        WIDTH,
        height,
        title,
        grid,
        xlabels,
        mark_safe("".join(lines)),
        tips,
    )


def _value(v: float | None) -> str:
    if v is None:
        return "—"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}"


def bar_chart(
    labels: Sequence[str], values: Sequence[float], *, height: int = 240, title: str = "", css: str = "c0"
) -> SafeString:
    """Vertical bars, one per label (the execution-time histogram)."""
    n = max(len(values), 1)
    left, right, top, bottom = 56, 14, 12, 64
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    peak = nice_ceiling(max(values, default=0))
    slot = plot_w / n

    def y(v: float) -> float:
        return top + plot_h - plot_h * (v / peak)

    grid = _grid(peak, y, left, right, "")
    bars = format_html_join(
        "",
        '<rect class="wurk-bar wurk-{}" x="{}" y="{}" width="{}" height="{}"><title>{}: {}</title></rect>'
        '<text class="wurk-axis" transform="translate({} {}) rotate(-40)" text-anchor="end">{}</text>',
        (
            (
                css,
                _fmt(left + i * slot + slot * 0.12),
                _fmt(y(v)),
                _fmt(slot * 0.76),
                _fmt(top + plot_h - y(v)),
                labels[i],
                _value(v),
                _fmt(left + i * slot + slot / 2),
                top + plot_h + 12,
                labels[i],
            )
            for i, v in enumerate(values)
        ),
    )
    return format_html(
        '<svg class="wurk-chart" viewBox="0 0 {} {}" role="img" aria-label="{}" '
        'xmlns="http://www.w3.org/2000/svg">{}{}</svg>',
        WIDTH,
        height,
        title,
        grid,
        bars,
    )
