"""A drain in a process of its own, for kill -9 tests: ``python -m tests.celery_drain_child BROKER REDIS``."""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

from django_wurk import Config, Wurk
from django_wurk import wurk as global_wurk
from django_wurk.celery.drain import Drain


class StandIn:
    """A task as ``django_wurk.celery.lookup`` returns one, reduced to the push the drain needs."""

    def __init__(self, wurk: Wurk, name: str) -> None:
        self.wurk = wurk
        self.name = name

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> str | None:
        from kombu.utils import json as kombu_json

        at = dt.datetime.fromisoformat(options["eta"]).timestamp() if options.get("eta") else None
        payload = {
            "class": self.name,
            "queue": "default",
            "args": json.loads(kombu_json.dumps([args, kwargs])),
            "jid": options["task_id"],
        }
        if options.get("expires"):
            payload["expires_at"] = dt.datetime.fromisoformat(options["expires"]).timestamp()
        return self.wurk.client.push(payload, at)


if __name__ == "__main__":
    broker_url, redis_url = sys.argv[1:3]
    global_wurk.configure(Config(redis_url=redis_url))
    tally = Drain(
        broker_url=broker_url,
        queues=["celery"],
        wurk=global_wurk,
        lookup=lambda name: StandIn(global_wurk, name),
        lease_seconds=1.0,
    ).run()
    print(f"drained: {tally}", flush=True)
