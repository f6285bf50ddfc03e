"""pytest fixtures for projects that use django-wurk (installed as a pytest plugin).

``wurk_fake`` records pushes instead of sending them to Redis; ``wurk_inline`` runs each
job as soon as it is pushed. Neither needs a Redis server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from django_wurk import testing

__all__ = ["wurk_fake", "wurk_inline"]


@pytest.fixture
def wurk_fake() -> Iterator[testing.FakeQueues]:
    with testing.fake() as queues:
        yield queues


@pytest.fixture
def wurk_inline() -> Iterator[None]:
    with testing.inline():
        yield
