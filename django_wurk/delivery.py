"""The delivery options this app adds to ``set(...)``: ``using`` and ``on_commit``.

They say which database transaction a push follows, which only the transaction-aware
pusher (``django_wurk.transaction``) understands; the engine carries them to it without
reading them. So they are a feature of this app, with their checks, rather than the
engine's: the package's ``__init__`` builds the engine with it, before any job class can be
defined, so a bad value fails at ``set(...)``. Nothing here imports Django:
``import django_wurk`` must work before settings are configured.
"""

from __future__ import annotations

from typing import Any

from django_wurk.core.feature import Feature


def check_using(value: Any, where: str) -> str | None:
    """A database alias (``None``: the transaction open now, as if not given)."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: using must be a database alias, got {value!r}")
    return value


def check_on_commit(value: Any, where: str) -> bool:
    """``False`` pushes at once, whatever transaction is open."""
    if not isinstance(value, bool):
        raise ValueError(f"{where}: on_commit must be True or False, got {value!r}")
    return value


FEATURE = Feature("transactions", delivery_options={"using": check_using, "on_commit": check_on_commit})
