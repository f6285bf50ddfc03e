"""The stored form of an encrypted argument: one JSON object in place of the value.

```
{"django_wurk.enc": 1, "key": "<version>", "iv": "<base64>", "ct": "<base64>", "tag": "<base64>"}
```

AES-256-GCM over the UTF-8 JSON of the value, with a fresh random 12-byte nonce (``iv``)
and a 16-byte tag kept apart from the ciphertext (``ct``); base64 is RFC 4648's standard
alphabet with padding. The associated data binds the ciphertext to its job: it is the
UTF-8 text ``django_wurk.enc/1``, the key version, the jid and the class, joined by
newlines, so an envelope copied into another job, or relabelled with another key
version, fails to open. The jid and class never change while a job retries, is
rescheduled or is retried from the dead set, so those keep opening.

Nothing here imports ``cryptography`` until a value is sealed or opened: installing the
package is needed only where encryption is used (``django-wurk[encryption]``).
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any

from django_wurk.core import wire
from django_wurk.core.engine import UnrunnableJob

#: The marker key, and the format version it holds (a new format gets a new number).
MARKER = "django_wurk.enc"
FORMAT = 1
NONCE_BYTES = 12
TAG_BYTES = 16
FIELDS = frozenset({MARKER, "key", "iv", "ct", "tag"})


class EncryptionError(ValueError):
    """An argument cannot be encrypted (no key, no ``cryptography``, nothing to encrypt)."""


class UndecryptableJob(UnrunnableJob):
    """The envelope cannot be opened: unknown key version, tampered, or not an envelope.

    The message never holds key material or the envelope's fields, only why.
    """


def is_envelope(value: Any) -> bool:
    """Whether ``value`` is already sealed (a re-push keeps it as it is)."""
    return isinstance(value, dict) and value.get(MARKER) == FORMAT and set(value) == FIELDS


def associated_data(version: str, jid: str, job_class: str) -> bytes | None:
    """None when a part holds a newline: the parts would not be told apart."""
    if "\n" in version or "\n" in jid or "\n" in job_class:
        return None
    return f"{MARKER}/{FORMAT}\n{version}\n{jid}\n{job_class}".encode("utf-8", "surrogatepass")


def _aesgcm(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise EncryptionError(
            "encrypted jobs need the 'cryptography' package: pip install 'django-wurk[encryption]'"
        ) from None
    return AESGCM(key)


def seal(value: Any, version: str, key: bytes, jid: str, job_class: str) -> dict[str, Any]:
    aad = associated_data(version, jid, job_class)
    if aad is None:
        raise EncryptionError(f"{job_class[:100]!r}: an encrypted job's jid and class cannot hold a newline")
    nonce = os.urandom(NONCE_BYTES)
    plaintext = wire.dumps(value).encode("utf-8")
    sealed = _aesgcm(key).encrypt(nonce, plaintext, aad)
    ciphertext, tag = sealed[:-TAG_BYTES], sealed[-TAG_BYTES:]
    return {
        MARKER: FORMAT,
        "key": version,
        "iv": _b64(nonce),
        "ct": _b64(ciphertext),
        "tag": _b64(tag),
    }


def open_envelope(envelope: Any, keys: Any, jid: Any, job_class: Any) -> Any:
    """The value sealed in ``envelope``; ``keys(version)`` gives a key or None.

    Raises ``UndecryptableJob`` for anything else, whatever another producer wrote.
    """
    if not isinstance(envelope, dict) or envelope.get(MARKER) != FORMAT:
        raise UndecryptableJob(
            "the job says encrypt: true but its last argument is not a django-wurk encrypted "
            f"argument (format {MARKER!r} {FORMAT}); Sidekiq Enterprise's format is not readable here"
        )
    version = envelope.get("key")
    if not isinstance(version, str):
        raise UndecryptableJob("the encrypted argument names no key version")
    key = keys(version)
    if key is None:
        raise UndecryptableJob(
            f"the encrypted argument uses key version {version[:40]!r}, which is not in "
            "WURK['ENCRYPTION_KEYS'] (rotated out too early?)"
        )
    nonce = _unb64(envelope.get("iv"), "iv")
    ciphertext = _unb64(envelope.get("ct"), "ct")
    tag = _unb64(envelope.get("tag"), "tag")
    if len(nonce) != NONCE_BYTES or len(tag) != TAG_BYTES:
        raise UndecryptableJob(
            f"the encrypted argument's iv must be {NONCE_BYTES} bytes and its tag {TAG_BYTES} bytes"
        )
    aad = (
        associated_data(version, jid, job_class)
        if isinstance(jid, str) and isinstance(job_class, str)
        else None
    )
    if aad is None:
        raise UndecryptableJob("an encrypted job needs a text jid and class, without newlines")
    cipher = _aesgcm(key)  # without the package: an EncryptionError, retried once it is installed
    from cryptography.exceptions import InvalidTag

    try:
        plaintext = cipher.decrypt(nonce, ciphertext + tag, aad)
    except InvalidTag:
        raise UndecryptableJob(
            f"the encrypted argument does not open with key version {version!r}: it was changed, "
            "moved from another job, or sealed with another key of that version"
        ) from None
    try:
        return wire.decode_json(plaintext, "encrypted argument")
    except wire.PayloadError:
        # Authentic, so written by a process holding the key; say so without quoting it.
        raise UndecryptableJob("the encrypted argument opened but does not hold JSON") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: Any, name: str) -> bytes:
    if not isinstance(value, str):
        raise UndecryptableJob(f"the encrypted argument's {name!r} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise UndecryptableJob(f"the encrypted argument's {name!r} is not valid base64") from None
