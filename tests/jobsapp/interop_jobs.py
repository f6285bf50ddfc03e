"""Jobs for the wire checks in ``tests/interop`` (Ruby to Python, Python to Ruby, timestamps).

Imported by those test modules only (not autodiscovered). Two kinds:

* Handles for Ruby classes (``Interop::Echo``, ``Interop::Stamp`` in ``ruby/app.rb``): Python
  only pushes them. They are declared ``abstract`` so they are not registered: a Python
  worker never claims the Ruby class name, and other test modules may declare the same
  Ruby class without a duplicate ``wire_name``.
* Python jobs that Ruby pushes by name (``WireCheck::*``). Each run appends what it saw
  (queue, arguments, the payload as decoded, and when it ran) to the Redis list
  ``seen:wire``, so a test sees every queue's order in one place.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django_wurk import Job, wurk

SEEN = "seen:wire"


class RubyEcho(Job, abstract=True):
    """Ruby's ``Interop::Echo``: records its arguments in ``ruby:seen``."""

    wire_name = "Interop::Echo"
    queue = "ruby"


class RubyStamp(Job, abstract=True):
    """Ruby's ``Interop::Stamp``: records its arguments and ``ran_at`` (Ruby's clock) in ``ruby:seen``."""

    wire_name = "Interop::Stamp"
    queue = "ruby"


class RubyKeywords(Job, abstract=True):
    """Ruby's ``Interop::Keywords``: records its args and the kwargs its middleware read."""

    wire_name = "Interop::Keywords"
    queue = "ruby"


class RubyFail(Job, abstract=True):
    """Ruby's ``Interop::Fail``: always raises (``retry: 3``), so its retry entry can be read."""

    wire_name = "Interop::Fail"
    queue = "ruby"


class Record(Job):
    wire_name = "WireCheck::Record"

    def perform(self, *args: Any) -> None:
        entry = {"queue": self.payload.get("queue"), "jid": self.jid, "args": list(args)}
        entry |= {"payload": self.payload, "ran_at": time.time()}
        wurk.redis.rpush(SEEN, json.dumps(entry))


class Fail(Job):
    """Always raises; its options are the defaults, so ``.set()`` shapes the payload exactly."""

    wire_name = "WireCheck::Fail"

    def perform(self, *args: Any) -> None:
        raise ValueError(f"wire boom {args!r}")


def seen() -> list[dict[str, Any]]:
    return [json.loads(x) for x in wurk.redis.lrange(SEEN, 0, -1)]
