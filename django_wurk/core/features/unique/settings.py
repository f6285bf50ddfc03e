"""The unique feature's setting: how a lock key is named."""

from __future__ import annotations

from dataclasses import dataclass

from django_wurk.core.config import ConfigError

#: ``UNIQUE_DIGEST``'s values (``lock.encode``): Sidekiq Enterprise 8's base64 sha256, its 7.x
#: hex sha1, and the hex sha256 django-wurk wrote before.
DIGESTS = ("enterprise8", "enterprise7", "sha256hex")


@dataclass(frozen=True)
class UniqueSettings:
    """``WURK["UNIQUE_DIGEST"]``, as its field in lower case."""

    #: How a unique job's lock key ``unique:<digest>`` is named. Every process pushing the same
    #: jobs must agree, or the same job takes two locks (docs/unique.md).
    unique_digest: str = "enterprise8"

    def __post_init__(self) -> None:
        if self.unique_digest not in DIGESTS:
            raise ConfigError(
                "UNIQUE_DIGEST", f"must be one of {', '.join(DIGESTS)}, got {self.unique_digest!r}"
            )
