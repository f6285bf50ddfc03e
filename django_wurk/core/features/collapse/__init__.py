"""Debounce and throttle: ``@job(debounce=5, debounce_max=60)``, ``@job(throttle=10)``.

A burst of pushes of one job collapses into its last payload (debounce), or only the first
push of each time slot runs (throttle). See ``docs/debounce.md``. ``FEATURE`` reads the
``debounce``, ``debounce_max``, ``throttle`` and ``collapse_key`` options (each checked
alone, and together by ``check_together``) and plugs in a push gate (``gate.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_wurk.core.feature import Feature, Place, Plug
from django_wurk.core.features.collapse.gate import TOKEN, CollapseGate
from django_wurk.core.features.collapse.identity import debounce_key, digest, throttle_prefix
from django_wurk.core.features.collapse.options import (
    COLLAPSE_KEY,
    DEBOUNCE,
    DEBOUNCE_MAX,
    OPTIONS,
    THROTTLE,
    check_together,
)

if TYPE_CHECKING:
    from django_wurk.core.engine import Wurk


def plug(wurk: Wurk) -> Plug:
    """What debounce and throttle plug into ``wurk``: the gate that decides each push."""
    return Plug(gate=CollapseGate(wurk))


FEATURE = Feature(
    "collapse",
    plug,
    # Its gate runs after unique's (a duplicate is dropped before it extends a burst) and
    # before status's (a throttled push is never "enqueued"). No middleware of its own.
    server_place=Place(inside=("unique",), outside=("status",)),
    job_options=OPTIONS,
    check_options=check_together,
)

__all__ = [
    "COLLAPSE_KEY",
    "DEBOUNCE",
    "DEBOUNCE_MAX",
    "FEATURE",
    "THROTTLE",
    "TOKEN",
    "CollapseGate",
    "debounce_key",
    "digest",
    "throttle_prefix",
]
