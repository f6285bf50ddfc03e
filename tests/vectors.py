"""Access to the real Ruby Sidekiq 6.4.1 payloads in ``tests/vectors``.

They live in the repository, so a plain clone passes its own tests; ``WURK_VECTORS_DIR``
points the tests at another copy (e.g. a newer recording) without editing anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

VECTORS = Path(os.environ.get("WURK_VECTORS_DIR") or Path(__file__).resolve().parent / "vectors")


def raw(name: str) -> bytes:
    path = VECTORS / name
    if not path.exists():
        where = (
            "WURK_VECTORS_DIR" if os.environ.get("WURK_VECTORS_DIR") else "the repository (tests/vectors/)"
        )
        raise FileNotFoundError(f"{path} is missing: the recorded Sidekiq vectors come from {where}")
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
    "dead_job_backtrace.json",
]
