"""Encryption and a job's exit: ``sys.exit(message with the secret)`` in an encrypted job.

The exit reaches the encryption middleware as a ``JobExit``, an ordinary failure
(``core/control.py``), so it is concealed like any error: before, a ``SystemExit`` passed
the middleware's ``except Exception`` untouched (and killed the thread besides).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Config, Wurk, job
from django_wurk.core.features.encryption.settings import EncryptionSettings
from django_wurk.core.registry import registry
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for
from tests.test_encryption import KEY1, SECRET, everything_in_redis


@job(encrypt=True, wire_name="enc.Exits", retry=3)
def exits_with_secret(user_id: int, bag: dict[str, Any]) -> None:
    sys.exit(f"card {bag['card']} refused for {user_id}")


registry.unregister(exits_with_secret.job_class.wire_name)  # registered only while a test here runs


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    registry.register(exits_with_secret.job_class)
    try:
        yield
    finally:
        registry.unregister(exits_with_secret.job_class.wire_name)


@pytest.fixture
def test_config(test_config: Config) -> Config:
    return test_config.with_section(EncryptionSettings(encryption_keys=(("1", KEY1),)))


def test_an_exit_inside_an_encrypted_job_is_concealed_like_any_failure(wurk: Wurk, r: Any) -> None:
    seen: list[BaseException] = []
    wurk.error_handlers.append(lambda exc, context: seen.append(exc))
    worker = Launcher(wurk)
    worker.start()
    try:
        exits_with_secret.perform_async(7, {"card": SECRET})
        wait_for(lambda: r.zcard("retry") == 1)
    finally:
        worker.stop()
    entry = json.loads(r.zrange("retry", 0, -1)[0])
    assert entry["error_class"] == "JobExit"
    assert SECRET.encode() not in everything_in_redis(r)
    assert seen
    for exc in seen:
        chain: BaseException | None = exc
        while chain is not None:
            assert SECRET not in repr(chain) and SECRET not in repr(vars(chain))
            chain = chain.__cause__ or chain.__context__
