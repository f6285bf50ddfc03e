"""A Python job that is also a Rails ActiveJob class: it runs Rails' payloads and enqueues ones Rails can run."""

from __future__ import annotations

from typing import Any

from django_wurk import job, wurk


@job(wire_name="HelloJob", activejob=True, queue="mailers")
def hello(*args: Any, **kwargs: Any) -> None:
    import json

    wurk.redis.rpush("seen:HelloJob", json.dumps({"args": list(args), "kwargs": kwargs}))


@job(wire_name="MyRailsJob", queue="vectors_aj")
def my_rails_job(*args: Any) -> None:
    """The class of the real Rails 6.1 payload in tests/vectors/queue_job_activejob.json."""
    import json

    wurk.redis.rpush("seen:MyRailsJob", json.dumps(list(args)))
