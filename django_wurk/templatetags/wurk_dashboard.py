"""Template helpers for the dashboard: times, durations, sizes and job data as text.

Nothing here marks job data safe: values are returned as plain strings for the template's
autoescaping, and the one tag that builds markup (``stamp``) uses ``format_html``.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from django import template
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_wurk.core import wire

register = template.Library()

#: Arguments longer than this are cut in lists (the detail page shows them whole).
PREVIEW_CHARS = 300


def to_datetime(value: Any) -> datetime | None:
    """An epoch timestamp (float seconds, or Sidekiq 8 integer milliseconds) as an aware datetime."""
    if isinstance(value, datetime):
        return value
    try:
        seconds = wire.read_stamp(value)
        if seconds is None or not math.isfinite(seconds) or seconds <= 0:
            return None
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):  # a 400-digit integer, year 300000...
        return None


def relative_time(seconds: float) -> str:
    """``42 seconds``, ``5 minutes``, ``3 hours``, ``2 days`` (the largest unit, rounded down)."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        if seconds >= size or unit == "second":
            n = int(seconds // size)
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return ""  # pragma: no cover


@register.simple_tag
def stamp(value: Any) -> SafeString | str:
    """``<time>`` with the relative time as text and the exact UTC time as a tooltip."""
    when = to_datetime(value)
    if when is None:
        return "—"
    seconds = (when - timezone.now()).total_seconds()
    relative = f"in {relative_time(seconds)}" if seconds >= 1 else f"{relative_time(-seconds)} ago"
    if abs(seconds) < 1:
        relative = "just now"
    iso = when.isoformat(timespec="seconds").replace("+00:00", "Z")
    exact = when.strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html('<time datetime="{}" title="{}">{}</time>', iso, exact, relative)


@register.filter
def utc(value: Any) -> str:
    when = to_datetime(value)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC") if when else "—"


@register.filter
def duration(seconds: Any) -> str:
    """Seconds as ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 4 h``."""
    try:
        s = float(seconds)
    except (TypeError, ValueError, OverflowError):
        return "—"
    if not math.isfinite(s) or s < 0:
        return "—"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


@register.filter
def milliseconds(ms: Any) -> str:
    try:
        return duration(float(ms) / 1000.0)
    except (TypeError, ValueError, OverflowError):
        return "—"


@register.filter
def kilobytes(kb: Any) -> str:
    try:
        value = int(kb)
    except (TypeError, ValueError, OverflowError):
        return "—"
    return str(filesizeformat(value * 1024)) if value > 0 else "—"


@register.filter
def number(value: Any) -> str:
    """``1234567`` -> ``1,234,567``."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError, OverflowError):
        return str(value)


def as_json(value: Any, indent: int | None = None) -> str:
    try:
        try:
            return json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=indent is not None)
        except (TypeError, ValueError):
            return repr(value)
    except RecursionError:
        return "(nested too deeply to show)"


@register.filter
def args_text(args: Any) -> str:
    """Arguments as one line of JSON, without the outer brackets, cut for lists."""
    text = ", ".join(as_json(a) for a in args) if isinstance(args, list) else as_json(args)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


@register.filter
def call_text(record: Any) -> str:
    """A job's arguments as one line, with the keyword arguments of a ``kwargs`` payload key
    (Celery tasks, django.tasks) written ``name=value`` after the positional ones."""
    kwargs = record.get("kwargs") if record.payload is not None else None
    return _call(record.display_args, kwargs)


@register.filter
def loop_call(loop: Any) -> str:
    """What a periodic loop's fires are called with, as ``call_text`` writes a job's."""
    return _call(loop.args, loop.kwargs)


def _call(args: Any, kwargs: Any) -> str:
    if not isinstance(kwargs, dict) or not kwargs or not isinstance(args, list):
        return args_text(args)
    parts = [as_json(a) for a in args] + [f"{k}={as_json(v)}" for k, v in kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


@register.filter
def pretty(value: Any) -> str:
    """Indented JSON (escaped by the template like any text)."""
    return as_json(value, indent=2)


@register.filter
def truncate(text: Any, length: int = 200) -> str:
    value = str(text)
    return value if len(value) <= length else value[: length - 1] + "…"
