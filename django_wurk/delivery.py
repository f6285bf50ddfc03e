"""The delivery options this app adds to ``set(...)``: ``using`` and ``on_commit``.

They say which database transaction a push follows, which only the transaction-aware
pusher (``django_wurk.transaction``) understands; the engine carries them to it without
reading them. So they are declared here, with their checks, rather than in the engine.
The package's ``__init__`` imports this module: ``django_wurk.core`` lives inside the
package, so no job class can be defined before these are declared, and a bad value fails
at ``set(...)`` as it always did. Nothing here imports Django: ``import django_wurk`` must
work before settings are configured.
"""

from __future__ import annotations

from typing import Any

from django_wurk.core.job import declare_delivery_option


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


declare_delivery_option("using", check_using)
declare_delivery_option("on_commit", check_on_commit)
