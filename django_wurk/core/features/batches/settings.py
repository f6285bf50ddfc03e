"""The batches feature's settings: how long a batch's keys live, and how many its indexes keep."""

from __future__ import annotations

from dataclasses import dataclass

from django_wurk.core.config import ConfigError


@dataclass(frozen=True)
class BatchSettings:
    """``WURK["BATCH_*"]``; each field is its key in lower case."""

    #: Seconds a batch and all its keys live while it has not succeeded (``Batch(expires_in=)``).
    batch_expires_in: int = 30 * 24 * 3600
    #: Seconds a batch is kept after its success fired (``Batch(linger=)``), for its status page.
    batch_linger: int = 24 * 3600
    #: The most entries the ``batches`` and ``dead-batches`` indexes keep (oldest trimmed first).
    batch_index_max: int = 1_000_000

    def __post_init__(self) -> None:
        for key, value in (
            ("BATCH_EXPIRES_IN", self.batch_expires_in),
            ("BATCH_LINGER", self.batch_linger),
            ("BATCH_INDEX_MAX", self.batch_index_max),
        ):
            if not value > 0:
                raise ConfigError(key, f"must be greater than 0, got {value!r}")
