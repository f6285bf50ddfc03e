"""Worker threads treat each job like a request for Django's database connections."""

from __future__ import annotations

import pytest
from django.db import connection

from django_wurk import Wurk
from django_wurk.db import CloseOldConnections


@pytest.mark.django_db
def test_connections_are_checked_before_and_after_each_job(wurk: Wurk) -> None:
    """A connection that broke between jobs (a database restart) must not reach the next job,
    and CONN_MAX_AGE must apply between jobs as it does between requests."""
    events: list[str] = []
    connection.ensure_connection()
    original = connection.close_if_unusable_or_obsolete

    def spy() -> None:
        events.append("check")
        original()

    connection.close_if_unusable_or_obsolete = spy  # type: ignore[method-assign]
    wurk.server_middleware.prepend(CloseOldConnections)  # as runwurk does (test_runwurk checks it)
    try:
        wurk.server_middleware.invoke(lambda: events.append("job"), object(), {"args": []}, "default")
        with pytest.raises(ZeroDivisionError):
            wurk.server_middleware.invoke(lambda: 1 / 0, object(), {"args": []}, "default")
    finally:
        del connection.close_if_unusable_or_obsolete
    assert events == ["check", "job", "check", "check", "check"]  # a failing job is checked after too


def test_a_thread_that_never_used_the_database_skips_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk over every database costs a fifth of a no-op job; jobs without a DB skip it."""
    import threading

    from django_wurk import db

    calls: list[int] = []
    monkeypatch.setattr(db, "close_old_connections", lambda: calls.append(1))
    ran: list[bool] = []
    thread = threading.Thread(
        target=lambda: CloseOldConnections()(object(), {}, "q", lambda: ran.append(True))
    )
    thread.start()
    thread.join()
    assert ran == [True] and calls == []
