"""What a Ruby Sidekiq (no Enterprise encryption) makes of a job encrypted here: it runs it,
and its ``perform`` gets the envelope as a plain Hash, never the value (docs/encryption.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django_wurk import Wurk
from django_wurk.core.features.encryption.settings import EncryptionSettings
from tests.conftest import wait_for
from tests.interop.conftest import ruby_seen
from tests.jobsapp.interop_jobs import RubyEcho

SECRET = "interop-secret-4111"


def test_a_ruby_worker_sees_the_envelope_not_the_value(
    wurk: Wurk, r: Any, ruby_worker: Callable[..., Any]
) -> None:
    wurk.configure(wurk.config.with_section(EncryptionSettings(encryption_keys=(("1", bytes(range(32))),))))
    jid = RubyEcho.set(encrypt=True).perform_async(7, {"card": SECRET})
    ruby_worker("ruby", concurrency=1)
    wait_for(lambda: ruby_seen(r), timeout=30)
    [seen] = ruby_seen(r)
    assert seen["jid"] == jid and seen["args"][0] == 7
    envelope = seen["args"][1]
    assert envelope["django_wurk.enc"] == 1 and envelope["key"] == "1"
    assert set(envelope) == {"django_wurk.enc", "key", "iv", "ct", "tag"}
    assert SECRET not in str(seen)
