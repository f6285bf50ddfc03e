"""Encrypted job arguments (Sidekiq Enterprise's ``encrypt: true``), with AES-256-GCM.

See ``docs/encryption.md``. Importing this package declares the ``encrypt`` job option and
plugs the client and server middleware into the global engine; ``install(wurk)`` does the
same for another ``Wurk``. The ``cryptography`` package is imported only when a value is
sealed or opened.
"""

from typing import Any

from django_wurk.core.engine import wurk as _wurk
from django_wurk.core.features.encryption.envelope import (
    FORMAT,
    MARKER,
    EncryptionError,
    UndecryptableJob,
    is_envelope,
)
from django_wurk.core.features.encryption.middleware import HIDDEN, EncryptedJobError, install
from django_wurk.core.job import declare_job_option


def _check_encrypt(value: Any, where: str) -> Any:
    if not isinstance(value, bool):
        raise ValueError(f"{where}: encrypt must be True or False, got {value!r}")
    return value


declare_job_option("encrypt", _check_encrypt)
install(_wurk)

__all__ = [
    "FORMAT",
    "HIDDEN",
    "MARKER",
    "EncryptedJobError",
    "EncryptionError",
    "UndecryptableJob",
    "install",
    "is_envelope",
]
