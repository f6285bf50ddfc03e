"""The Metrics tab's History page: the leader's snapshots drawn and listed, escaped, any period."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from django_wurk import Wurk
from django_wurk.core import keys as core_keys
from django_wurk.core.features.history import keys
from django_wurk.core.features.history.recorder import Recorder
from tests.conftest import wait_for
from tests.dashboard.conftest import url

XSS = "<script>window.__xss=1</script>"


def page(client: Client, query: str = "") -> str:
    response = client.get(url("history") + query)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def server_ms(r: Any) -> int:
    s, us = r.time()
    return int(s) * 1000 + int(us) // 1000


def test_history_draws_and_lists_the_snapshots(viewer: Client, wurk: Wurk, r: Any) -> None:
    now = server_ms(r)
    for n in range(3):
        r.xadd(
            keys.STREAM,
            {
                "v": "1", "processed": str(100 + 40 * n), "failed": str(5 + n), "enqueued": str(7 * n),
                "scheduled": "1", "retries": "2", "dead": "3", "busy": "4", "processes": "2",
                "queues": f'[["{"mail" if n else "default"}", {7 * n}, 12.5]]', "leader": "host:1:a",
            },
            id=f"{now - (3 - n) * 30_000}-0",
        )  # fmt: skip
    html = page(viewer)
    assert "3 snapshots kept" in html and 'id="wurk-history"' in html
    assert html.count('<svg class="wurk-chart"') == 3  # executions, sizes, latency
    rows = re.findall(r'<td class="wurk-num">\+(\d+)</td>\s*<td class="wurk-num">\+(\d+)</td>', html)
    assert rows == [("40", "1"), ("40", "1")]  # newest first; the oldest has no delta ("—")
    assert "<code>mail</code> 14, 12.5 s" in html and "host:1:a" in html
    assert "Executions between snapshots" in html
    for period in ("24h", "7d", "30d", "bogus"):
        assert "3 snapshots kept" in page(viewer, f"?period={period}")
    # Reached from the per-class page and back.
    metrics = viewer.get(url("metrics")).content.decode()
    assert url("history") in metrics and url("metrics") in html


def test_history_without_snapshots_says_why(viewer: Client, wurk: Wurk, r: Any) -> None:
    html = page(viewer)
    assert "No snapshot in the last 1 hour" in html and 'id="wurk-no-leader"' in html
    r.set(core_keys.LEADER, "host:1:a", ex=30)
    assert 'id="wurk-no-leader"' not in page(viewer)


def test_a_snapshot_the_recorder_wrote_shows(viewer: Client, wurk: Wurk, r: Any) -> None:
    r.set(core_keys.LEADER, "host:1:a", ex=30)
    r.set(core_keys.STAT_PROCESSED, 9)
    recorder = Recorder(wurk, "host:1:a", 0.05, 3600)
    recorder.record()
    r.set(core_keys.STAT_PROCESSED, 21)
    wait_for(recorder.record, timeout=2)
    assert "+12" in page(viewer)


def test_hostile_snapshots_are_escaped_and_never_a_500(viewer: Client, wurk: Wurk, r: Any) -> None:
    now = server_ms(r)
    junk: list[dict[Any, Any]] = [
        {"processed": "abc", "failed": "-1", "enqueued": "9" * 400, "leader": XSS},
        {"processed": b"\xff\xfe", "queues": f'[["{XSS}", 5, 1.5]]'},
        {"queues": '[["x", "5", 1], [1, 2, 3], ["y", 2, NaN], ["z", 1e400, 1], "q", null]'},
        {"queues": "[" * 5000, "busy": "1e3", "dead": " 3"},
        {b"\xff": b"\xfe", "leader": b"\xff" * 10_000},
        {"queues": '{"default": [1, 2]}', "processed": "5"},
        {"processed": "18446744073709551616", "failed": "0.5"},
    ]
    for n, fields in enumerate(junk):
        r.xadd(keys.STREAM, fields, id=f"{now - 60_000 + n}-0")
    for period in ("", "?period=30d"):
        html = page(viewer, period)
        assert XSS not in html and "&lt;script&gt;" in html
        assert f"{len(junk)} snapshots" in html


def test_a_history_key_of_another_type_shows_no_history(viewer: Client, wurk: Wurk, r: Any) -> None:
    r.rpush(keys.STREAM, "x")
    assert "No snapshot in the last 1 hour" in page(viewer)


def test_the_charts_line_up_and_never_repeat_an_axis_label(viewer: Client, wurk: Wurk, r: Any) -> None:
    now = server_ms(r)
    for n in range(8):  # a snapshot every 30 s: 3.5 minutes
        r.xadd(
            keys.STREAM,
            {"v": "1", "processed": str(100 + 40 * n), "failed": str(n), "enqueued": str(n), "scheduled": "0",
             "retries": "0", "dead": "0", "busy": "1", "processes": "1", "queues": '[["default", 3, 1.5]]',
             "leader": "host:1:a"},
            id=f"{now - (8 - n) * 30_000}-0",
        )  # fmt: skip
    charts = re.findall(r'<svg class="wurk-chart".*?</svg>', page(viewer), re.S)
    assert len(charts) == 3
    for svg in charts:
        labels = re.findall(
            r'<text class="wurk-axis" x="[\d.]+" y="\d+" text-anchor="\w+">([^<]+)</text>', svg
        )
        x_labels = [t for t in labels if ":" in t]
        assert len(x_labels) == len(set(x_labels)) >= 4, x_labels
        assert all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in x_labels), x_labels  # minutes alone repeat
    # One x position per snapshot in every chart, at the same places: a moment lines up.
    columns = [re.findall(r'<rect class="wurk-hit" x="([\d.]+)"', svg) for svg in charts]
    assert columns[0] == columns[1] == columns[2] and len(columns[0]) == 8
    # Executions have no point at the first snapshot (no delta yet): its line starts at the second.
    first_points = [
        re.search(r'<polyline class="wurk-line wurk-\w+" points="([\d.]+),', svg).group(1) for svg in charts
    ]  # type: ignore[union-attr]
    sizes_positions = re.findall(r'<polyline class="wurk-line wurk-c0" points="([^"]+)"', charts[1])[
        0
    ].split()
    assert (
        first_points[0] == sizes_positions[1].split(",")[0]
        and first_points[1] == sizes_positions[0].split(",")[0]
    )
