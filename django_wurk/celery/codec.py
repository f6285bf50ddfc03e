"""Arguments and results in kombu's JSON codec, as Celery writes them.

Celery's default serializer turns ``datetime``/``date``/``time``, ``Decimal``, ``UUID`` and
``bytes`` into ``{"__type__": ..., "__value__": ...}`` envelopes (``kombu.utils.json``). A
Celery task's arguments go through the same codec here, so a value that survived Celery
survives the move; the envelopes are plain JSON objects, so the job stays a valid Sidekiq
payload. A job meant for Ruby should not use these types: Ruby sees the envelope.

Encoding yields JSON-native values (dicts, lists, strings, numbers) for the payload;
decoding turns envelopes back into Python values with kombu's own decoder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

try:
    from kombu.utils import json as kombu_json
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installation
    if exc.name != "kombu":
        raise
    raise ImportError(
        'django_wurk.celery needs kombu (Celery\'s codec): pip install "django-wurk[celery]"'
    ) from None

from django_wurk.core import wire

# kombu ships no type hints: these are its two entry points, typed as they behave.
_kombu_dumps = cast("Callable[[Any], str]", kombu_json.dumps)
_kombu_loads = cast("Callable[[str], Any]", kombu_json.loads)


def encode(value: Any) -> Any:
    """``value`` as JSON-native data, with kombu's envelopes for the types JSON lacks.

    Raises ``TypeError`` for what neither JSON nor kombu can carry (a set, an object).
    """
    return json.loads(_kombu_dumps(value))


def decode(value: Any) -> Any:
    """The Python values behind the envelopes in JSON-native ``value``."""
    return _kombu_loads(wire.dumps(value))


def dumps(value: Any) -> str:
    """Text in kombu's JSON, as Celery's result backend stores it."""
    return _kombu_dumps(value)


def loads(text: bytes | str) -> Any:
    """Decode text written by ``dumps`` (or by Celery); ``ValueError`` for anything else."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _kombu_loads(text)
