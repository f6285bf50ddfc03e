"""Every Redis key periodic jobs use (Sidekiq Enterprise's layout, features.md §4.4).

``periodic`` is the set of registered loop ids; ``loops:{lid}`` the loop's hash
(``schedule, klass, options, tz, paused, lf, nf``); ``loop-history:{lid}`` its last fires,
newest first; the leader key (``Config.leader_key``: ``wurk-leader`` unless told to share
Sidekiq Enterprise's ``dear-leader``) the leader's identity.
"""

from __future__ import annotations

from django_wurk.core.keys import LEADER

#: Every registered loop id.
PERIODIC = "periodic"
#: How many fires ``loop-history:{lid}`` keeps.
HISTORY_MAX = 25

__all__ = ["HISTORY_MAX", "LEADER", "PERIODIC", "history", "loop"]


def loop(lid: str | bytes) -> str | bytes:
    """The loop's hash. A ``bytes`` lid (read from the ``periodic`` set) gives a ``bytes`` key,
    so a member that is not UTF-8 still names exactly its own key."""
    return b"loops:" + lid if isinstance(lid, bytes) else f"loops:{lid}"


def history(lid: str | bytes) -> str | bytes:
    """The loop's last fires: a list of JSON ``[fired_at, jid]``, newest first."""
    return b"loop-history:" + lid if isinstance(lid, bytes) else f"loop-history:{lid}"
