"""Access to the real Ruby Sidekiq 6.4.1 payloads in ``shared/vectors``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

VECTORS = Path(os.environ.get("WURK_VECTORS_DIR", Path(__file__).resolve().parents[2] / "shared" / "vectors"))


def raw(name: str) -> bytes:
    path = VECTORS / name
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the shared/ reference vectors must sit beside the repository"
        )
    return path.read_bytes()


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw("MANIFEST.json"))
    return data


JOB_VECTORS = [
    "queue_job.json",
    "queue_job_push_bulk.json",
    "queue_job_activejob.json",
    "scheduled_job.json",
    "retry_job.json",
    "retry_job_after_manual_retry.json",
    "retry_job_second_failure.json",
    "dead_job_killed.json",
    "dead_job_retries_exhausted.json",
]
