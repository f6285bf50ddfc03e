"""Celery's task state names, with the same values, so code comparing ``result.state`` keeps working.

Only PENDING, STARTED (with ``track_started``), RETRY, SUCCESS, FAILURE and REVOKED (an
expired job) are ever written here; RECEIVED and REJECTED exist for comparisons.
"""

from __future__ import annotations

PENDING = "PENDING"
RECEIVED = "RECEIVED"
STARTED = "STARTED"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"
REJECTED = "REJECTED"
RETRY = "RETRY"
IGNORED = "IGNORED"

READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
UNREADY_STATES = frozenset({PENDING, RECEIVED, STARTED, REJECTED, RETRY})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES = frozenset({FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, RECEIVED, STARTED, SUCCESS, FAILURE, RETRY, REVOKED})

__all__ = [
    "ALL_STATES",
    "EXCEPTION_STATES",
    "FAILURE",
    "IGNORED",
    "PENDING",
    "PROPAGATE_STATES",
    "READY_STATES",
    "RECEIVED",
    "REJECTED",
    "RETRY",
    "REVOKED",
    "STARTED",
    "SUCCESS",
    "UNREADY_STATES",
]
