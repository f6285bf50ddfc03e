"""The encryption feature's settings: its keys, by version, and the one new pushes use."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django_wurk.core.config import ConfigError

ENCRYPTION_KEY_BYTES = 32
#: A key version: short text, as it is written into every encrypted argument.
KEY_VERSION = re.compile(r"\A[A-Za-z0-9_.\-]{1,32}\Z")


def _key_version(raw: Any) -> str:
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not KEY_VERSION.fullmatch(raw.strip()):
        # The value is not quoted: a key written where its version goes would be shown.
        raise ConfigError(
            "ENCRYPTION_KEYS", "a key version must be a number or a name of 1-32 characters [A-Za-z0-9_.-]"
        )
    return raw.strip()


def _key_bytes(version: str, raw: Any) -> bytes:
    """32 raw bytes, or their base64 (standard or URL-safe alphabet). Never quotes the key."""
    import base64
    import binascii

    if isinstance(raw, str):
        text = raw.strip()
        try:
            raw = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(
                "ENCRYPTION_KEYS", f"the key of version {version!r} is text but not base64 (of 32 bytes)"
            ) from None
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise ConfigError(
            "ENCRYPTION_KEYS",
            f"the key of version {version!r} must be bytes or base64 text, not {type(raw).__name__}",
        )
    key = bytes(raw)
    if len(key) != ENCRYPTION_KEY_BYTES:
        raise ConfigError(
            "ENCRYPTION_KEYS",
            f"the key of version {version!r} is {len(key)} bytes; AES-256 needs {ENCRYPTION_KEY_BYTES}",
        )
    return key


def parse_encryption_keys(raw: Any) -> tuple[tuple[str, bytes], ...]:
    """``{version: key}``, ``"1:<base64>,2:<base64>"`` (commas or whitespace), or the parsed pairs."""
    if isinstance(raw, str):
        pairs: list[tuple[Any, Any]] = []
        for item in re.split(r"[,\s]+", raw.strip()):
            if not item:
                continue
            version, sep, key = item.partition(":")
            if not sep:
                raise ConfigError("ENCRYPTION_KEYS", "expected 'version:base64key' items separated by commas")
            pairs.append((version, key))
    elif isinstance(raw, Mapping):
        pairs = list(raw.items())
    elif isinstance(raw, (tuple, list)) and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in raw):
        pairs = [(p[0], p[1]) for p in raw]
    elif raw is None:
        pairs = []
    else:
        raise ConfigError("ENCRYPTION_KEYS", f"expected a dict of version to key, not {type(raw).__name__}")
    keys: dict[str, bytes] = {}
    for version_raw, key_raw in pairs:
        version = _key_version(version_raw)
        if version in keys:
            raise ConfigError("ENCRYPTION_KEYS", f"version {version!r} is given twice")
        keys[version] = _key_bytes(version, key_raw)
    return tuple(keys.items())


@dataclass(frozen=True)
class EncryptionSettings:
    """``WURK["ENCRYPTION_KEYS"]`` and ``WURK["ENCRYPTION_ACTIVE"]``; each field is its key in lower case."""

    #: Keys for ``encrypt=True`` jobs, by version: ``{version: key}`` in settings (a key is 32
    #: raw bytes or their base64), ``"1:<base64>,2:<base64>"`` in the environment. Read into
    #: ``((version, key), ...)``; never shown by ``repr()``.
    encryption_keys: Any = field(default=(), repr=False)
    #: The version new pushes are encrypted with; empty means the only key's (``version``).
    encryption_active: Any = ""

    def __post_init__(self) -> None:
        # Read here rather than by the caller, so that a direct EncryptionSettings(...) is read alike.
        keys = parse_encryption_keys(self.encryption_keys)
        object.__setattr__(self, "encryption_keys", keys)
        active = self.encryption_active
        if active is None or active == "":
            active = ""
        else:
            try:
                active = _key_version(active)
            except ConfigError:
                raise ConfigError(
                    "ENCRYPTION_ACTIVE", f"must be a key version of ENCRYPTION_KEYS, got {active!r}"
                ) from None
        if not active and len(keys) > 1:
            raise ConfigError(
                "ENCRYPTION_ACTIVE",
                "several ENCRYPTION_KEYS are given: say which version new jobs are encrypted with",
            )
        elif active and active not in dict(keys):
            raise ConfigError("ENCRYPTION_ACTIVE", f"version {active!r} has no key in ENCRYPTION_KEYS")
        object.__setattr__(self, "encryption_active", active)

    @property
    def version(self) -> str:
        """The key version new pushes are encrypted with ("" when there is no key)."""
        if self.encryption_active:
            return str(self.encryption_active)
        return self.encryption_keys[0][0] if self.encryption_keys else ""

    def key(self, version: str) -> bytes | None:
        """The key of ``version`` (any version still listed decrypts: that is rotation)."""
        for known, key in self.encryption_keys:
            if known == version:
                return bytes(key)
        return None
