"""Encrypted job arguments (Sidekiq Enterprise's ``encrypt: true``), with AES-256-GCM.

See ``docs/encryption.md``. ``FEATURE`` reads the ``encrypt`` job option and plugs in the
client and server middleware. The ``cryptography`` package is imported only when a value is
sealed or opened.
"""

from typing import Any

from django_wurk.core.feature import Feature, Place
from django_wurk.core.features.encryption.envelope import (
    FORMAT,
    MARKER,
    EncryptionError,
    UndecryptableJob,
    is_envelope,
)
from django_wurk.core.features.encryption.middleware import HIDDEN, EncryptedJobError, plug
from django_wurk.core.features.encryption.settings import EncryptionSettings


def _check_encrypt(value: Any, where: str) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"{where}: encrypt must be True or False, got {value!r}")
    return value


FEATURE = Feature(
    "encryption",
    plug,
    # The client's seals the last argument after every other client middleware saw the push
    # (on its way out), the server's opens it around ``perform`` only: every other middleware,
    # handler and the retry set see it sealed.
    client_place=Place(edge="outer"),
    server_place=Place(edge="inner"),
    job_options={"encrypt": _check_encrypt},
    settings=EncryptionSettings,
)

__all__ = [
    "FEATURE",
    "FORMAT",
    "HIDDEN",
    "MARKER",
    "EncryptedJobError",
    "EncryptionError",
    "EncryptionSettings",
    "UndecryptableJob",
    "is_envelope",
]
