"""Encrypted job arguments: real pushes and real workers, with the raw Redis bytes searched.

The secret is a marker no other part of a payload holds, so finding it anywhere in Redis,
in a log record or in an error field is a leak.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from django_wurk import Config, Job, Wurk, job
from django_wurk.api import DeadSet
from django_wurk.core import keys, wire
from django_wurk.core.config import ConfigError
from django_wurk.core.features import SETTINGS
from django_wurk.core.features.encryption import HIDDEN, MARKER, EncryptionError, is_envelope
from django_wurk.core.features.encryption.envelope import seal
from django_wurk.core.features.encryption.middleware import EncryptedJobError, conceal
from django_wurk.core.features.encryption.settings import EncryptionSettings
from django_wurk.core.registry import registry
from django_wurk.core.worker import Launcher
from tests.conftest import wait_for

SECRET = "4111-1111-1111-1111-card-of-test"
KEY1 = bytes(range(32))
KEY2 = bytes(range(32, 64))

#: Arguments the jobs below were called with, in this process (never in Redis: that is the point).
received: list[list[Any]] = []
_lock = threading.Lock()


@job(encrypt=True, wire_name="enc.Charge")
def charge(user_id: int, bag: dict[str, Any]) -> None:
    with _lock:
        received.append([user_id, bag])


class CardDeclined(Exception):
    pass


@job(encrypt=True, wire_name="enc.Decline", backtrace=True, retry=3)
def decline(user_id: int, bag: dict[str, Any]) -> None:
    secret = bag["card"]  # a local holding the secret, for reporters that capture locals
    raise CardDeclined(f"card {secret} declined for {user_id}")


@job(encrypt=True, wire_name="enc.Once", retry=False)
def once(bag: str) -> None:
    with _lock:
        received.append([bag])


class OSErrorJob(Job):
    wire_name = "enc.OSError"
    options = {"encrypt": True}

    def perform(self, path: str) -> None:
        raise FileNotFoundError(2, "No such file", path)


@job(encrypt=True, unique_for=600, wire_name="enc.Unique")
def unique_charge(user_id: int, bag: dict[str, Any]) -> None: ...


@job(encrypt=True, wire_name="enc.Variadic")
def variadic(*args: Any) -> None: ...


class AttributeJob(Job):
    """``encrypt`` as a class attribute, like ``queue`` and ``retry``."""

    wire_name = "enc.Attribute"
    encrypt = True

    def perform(self, bag: str) -> None:
        with _lock:
            received.append([bag])


ENCRYPTED = [
    charge.job_class,
    decline.job_class,
    once.job_class,
    OSErrorJob,
    AttributeJob,
    unique_charge.job_class,
    variadic.job_class,
]
# Registered only while a test of this module runs: `manage.py check` elsewhere in the
# suite must not find encrypt=True jobs in a configuration without keys.
for _cls in ENCRYPTED:
    registry.unregister(_cls.wire_name)


def registered(classes: list[type[Job]]) -> Iterator[None]:
    """``classes`` registered for the length of one test (``yield from`` in a fixture)."""
    for cls in classes:
        registry.register(cls)
    try:
        yield
    finally:
        for cls in classes:
            registry.unregister(cls.wire_name)


@pytest.fixture(autouse=True)
def encrypted_jobs() -> Iterator[None]:
    received.clear()
    yield from registered(ENCRYPTED)


@pytest.fixture
def test_config(test_config: Config) -> Config:
    """The suite's fast test configuration, with one encryption key."""
    return test_config.with_section(EncryptionSettings(encryption_keys=(("1", KEY1),)))


def everything_in_redis(r: Any) -> bytes:
    """Every byte Redis holds (keys and values of every type), to search for a leak."""
    out = []
    for name in r.scan_iter(count=1000):
        out.append(name)
        kind = r.type(name)
        if kind == b"list":
            out += r.lrange(name, 0, -1)
        elif kind == b"zset":
            out += r.zrange(name, 0, -1)
        elif kind == b"hash":
            for k, v in r.hgetall(name).items():
                out += [k, v]
        elif kind == b"set":
            out += list(r.smembers(name))
        elif kind == b"string":
            out.append(r.get(name))
    return b"\n".join(out)


def leaks(blob: bytes | str) -> bool:
    text = blob if isinstance(blob, str) else blob.decode("utf-8", "replace")
    return SECRET in text or "card-of-test" in text


@pytest.fixture
def running(wurk: Wurk) -> Iterator[Any]:
    """``running()`` starts a worker on the engine as configured now; stopped after the test."""
    started: list[Launcher] = []

    def start() -> Launcher:
        worker = Launcher(wurk)
        worker.start()
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.stop()


def dead(r: Any) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange(keys.DEAD, 0, -1)]


def retries(r: Any) -> list[dict[str, Any]]:
    return [json.loads(m) for m in r.zrange(keys.RETRY, 0, -1)]


# Push and run ---------------------------------------------------------------------------


def test_the_worker_gets_the_plaintext_and_redis_never_holds_it(wurk: Wurk, r: Any, running: Any) -> None:
    jid = charge.perform_async(42, {"card": SECRET})
    raw = r.lrange("queue:default", 0, -1)
    assert len(raw) == 1 and not leaks(everything_in_redis(r))
    stored = json.loads(raw[0])
    assert stored["jid"] == jid and stored["encrypt"] is True
    assert stored["args"][0] == 42 and is_envelope(stored["args"][1])
    envelope = stored["args"][1]
    assert envelope[MARKER] == 1 and envelope["key"] == "1"
    assert len(base64.b64decode(envelope["iv"])) == 12 and len(base64.b64decode(envelope["tag"])) == 16

    running()
    wait_for(lambda: received)
    assert received == [[42, {"card": SECRET}]]
    assert not leaks(everything_in_redis(r))


def test_perform_bulk_seals_each_job_for_its_own_jid(wurk: Wurk, r: Any, running: Any) -> None:
    jids = charge.perform_bulk([[i, {"card": SECRET, "n": i}] for i in range(5)])
    stored = [json.loads(x) for x in r.lrange("queue:default", 0, -1)]
    assert sorted(p["jid"] for p in stored) == sorted(jids)
    assert all(is_envelope(p["args"][-1]) for p in stored) and not leaks(everything_in_redis(r))
    running()
    wait_for(lambda: len(received) == 5)
    assert sorted(a[1]["n"] for a in received) == list(range(5))


def test_two_pushes_of_the_same_secret_differ(wurk: Wurk, r: Any) -> None:
    charge.perform_async(1, {"card": SECRET})
    charge.perform_async(1, {"card": SECRET})
    a, b = (json.loads(x)["args"][1] for x in r.lrange("queue:default", 0, -1))
    assert a["iv"] != b["iv"] and a["ct"] != b["ct"]


def test_a_scheduled_job_keeps_its_envelope_when_promoted(wurk: Wurk, r: Any, running: Any) -> None:
    charge.perform_in(0.2, 7, {"card": SECRET})
    [member] = r.zrange(keys.SCHEDULE, 0, -1)
    before = json.loads(member)["args"][1]
    assert is_envelope(before) and not leaks(member)
    # Without the server middleware the job is handed what is stored: the very envelope
    # pushed, so the promotion through the client middleware did not seal it again.
    wurk.server_middleware.clear()
    running()
    wait_for(lambda: received)
    assert received == [[7, before]]


def test_perform_inline_runs_both_chains(wurk: Wurk) -> None:
    charge.perform_inline(3, {"card": SECRET})
    assert received == [[3, {"card": SECRET}]]


def test_the_testing_modes_record_sealed_payloads_and_run_them_opened(wurk: Wurk) -> None:
    from django_wurk import testing

    with testing.fake(wurk) as queues:
        charge.perform_async(4, {"card": SECRET})
        [recorded] = queues.jobs_for(charge)
        assert is_envelope(recorded["args"][-1]) and not leaks(json.dumps(recorded))
        assert queues.drain() == 1
    assert received == [[4, {"card": SECRET}]]


def test_other_client_middleware_sees_the_plaintext_and_the_wire_gets_the_envelope(
    wurk: Wurk, r: Any
) -> None:
    """Sealing is the last step before the wire, wherever later middleware is added."""
    seen: list[Any] = []

    class Digest:
        def __call__(self, job_class: str, payload: Any, queue: str, call_next: Any) -> Any:
            seen.append(payload["args"][-1])
            return call_next()

    wurk.client_middleware.add(Digest)
    charge.perform_async(5, {"card": SECRET})
    assert seen == [{"card": SECRET}]
    assert not leaks(everything_in_redis(r))


def test_server_middleware_before_it_sees_only_the_envelope(wurk: Wurk) -> None:
    from django_wurk.core.features.encryption.middleware import EncryptionServerMiddleware

    seen: list[Any] = []

    class Outer:
        def __call__(self, job: Any, payload: Any, queue: str, call_next: Any) -> None:
            seen.append(payload["args"][-1])
            call_next()
            seen.append(payload["args"][-1])

    wurk.server_middleware.insert_before(EncryptionServerMiddleware, Outer)
    charge.perform_inline(6, {"card": SECRET})
    assert received == [[6, {"card": SECRET}]]
    assert len(seen) == 2 and all(is_envelope(v) for v in seen)


def test_failure_keeps_the_envelope_and_hides_the_message(
    wurk: Wurk, r: Any, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    reported: list[tuple[BaseException, dict[str, Any]]] = []
    wurk.error_handlers.append(lambda exc, ctx: reported.append((exc, ctx)))
    caplog.set_level(logging.DEBUG, logger="django_wurk")
    jid = decline.perform_async(9, {"card": SECRET})
    sealed = json.loads(r.lrange("queue:default", 0, -1)[0])["args"][1]
    running()
    wait_for(lambda: r.zcard(keys.RETRY) == 1)
    [entry] = retries(r)
    assert entry["jid"] == jid and entry["args"] == [9, sealed]
    assert entry["error_class"] == "CardDeclined" and entry["error_message"] == HIDDEN
    assert wire.decode_backtrace(entry["error_backtrace"])  # the frames are kept; they hold no values
    assert not leaks(everything_in_redis(r))
    assert caplog.records and not any(leaks(rec.getMessage()) for rec in caplog.records)
    assert not leaks(caplog.text)
    [(exc, ctx)] = reported
    assert isinstance(exc, CardDeclined) and str(exc) == HIDDEN
    assert exc.__context__ is None and exc.__cause__ is None
    assert ctx["job"]["args"] == [9, sealed]
    # Reporters that capture local variables find none holding the secret.
    tb = exc.__traceback__
    while tb is not None:
        assert not leaks(repr(tb.tb_frame.f_locals)), tb.tb_frame.f_code.co_name
        tb = tb.tb_next


def test_an_oserror_keeps_its_class_but_not_its_file_name(wurk: Wurk, r: Any, running: Any) -> None:
    """Its message is built from its fields, not its args: the concealed copy has neither."""
    OSErrorJob.perform_async(f"/secrets/{SECRET}")
    running()
    wait_for(lambda: r.zcard(keys.RETRY) == 1)
    [entry] = retries(r)
    assert entry["error_class"] == "FileNotFoundError" and entry["error_message"] == HIDDEN
    assert not leaks(everything_in_redis(r))


@pytest.mark.parametrize(
    "make",
    [
        lambda: ValueError(SECRET),
        lambda: KeyError(SECRET),
        lambda: RuntimeError("a", SECRET),
        lambda: UnicodeDecodeError("utf-8", SECRET.encode(), 0, 1, SECRET),
        lambda: OSError(2, SECRET, SECRET),
    ],
    ids=["ValueError", "KeyError", "two args", "UnicodeDecodeError", "OSError"],
)
def test_conceal_leaves_no_trace_of_the_message(make: Any) -> None:
    try:
        try:
            raise LookupError(SECRET)
        except LookupError:
            exc = make()
            exc.add_note(SECRET)
            raise exc  # noqa: B904 - chained on purpose: the context holds the secret too
    except Exception as raised:
        kind = type(raised)
        shown = conceal(raised)
    assert not leaks(str(shown)) and not leaks(repr(shown))
    assert shown.__context__ is None and shown.__cause__ is None
    assert not leaks(repr(getattr(shown, "__notes__", "")))
    assert type(shown) in (kind, EncryptedJobError)


# Keys and rotation ------------------------------------------------------------------------


def test_rotation_old_jobs_still_run_and_new_ones_use_the_active_key(
    wurk: Wurk, r: Any, running: Any, test_config: Config
) -> None:
    charge.perform_async(1, {"card": SECRET})
    wurk.configure(
        test_config.with_section(
            EncryptionSettings(encryption_keys=(("1", KEY1), ("2", KEY2)), encryption_active="2")
        )
    )
    charge.perform_async(2, {"card": SECRET})
    versions = [json.loads(x)["args"][1]["key"] for x in r.lrange("queue:default", 0, -1)]
    assert sorted(versions) == ["1", "2"]
    running()
    wait_for(lambda: len(received) == 2)
    assert sorted(received, key=lambda a: a[0]) == [[1, {"card": SECRET}], [2, {"card": SECRET}]]


def test_a_push_without_keys_fails_and_pushes_nothing(wurk: Wurk, r: Any, test_config: Config) -> None:
    wurk.configure(test_config.with_section(EncryptionSettings()))
    with pytest.raises(EncryptionError, match=r"ENCRYPTION_KEYS"):
        charge.perform_async(1, {"card": SECRET})
    assert r.llen("queue:default") == 0


def test_an_encrypted_job_needs_an_argument(wurk: Wurk, r: Any) -> None:
    # (a job whose signature asks for arguments fails earlier, naming the missing one)
    with pytest.raises(EncryptionError, match="needs an argument"):
        variadic.perform_async()
    assert r.llen("queue:default") == 0


def test_encrypt_as_a_class_attribute_seals_too(wurk: Wurk, r: Any) -> None:
    AttributeJob.perform_async(SECRET)
    [raw] = r.lrange("queue:default", 0, -1)
    assert is_envelope(json.loads(raw)["args"][0]) and not leaks(raw)
    AttributeJob.perform_inline(SECRET)
    assert received == [[SECRET]]


def test_unique_jobs_cannot_tell_encrypted_duplicates_apart(wurk: Wurk, r: Any) -> None:
    """The unique lock is taken where the job is written, over the sealed argument, which
    differs at every push: documented (and warned by `check`) rather than hidden."""
    unique_charge.perform_async(1, {"card": SECRET})
    unique_charge.perform_async(1, {"card": SECRET})
    assert r.llen("queue:default") == 2
    assert not leaks(everything_in_redis(r))


def test_the_encrypt_option_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="encrypt must be True or False"):
        charge.set(encrypt="yes")


# Envelopes that do not open go to the dead set at once ----------------------------------


def sealed_payload(jid: str = "a" * 24, job_class: str = "enc.Charge", **changes: Any) -> dict[str, Any]:
    envelope = seal({"card": SECRET}, "1", KEY1, jid, job_class)
    envelope.update(changes)
    return {"class": job_class, "args": [5, envelope], "jid": jid, "queue": "default", "retry": 5,
            "encrypt": True, "created_at": 1.0, "enqueued_at": 1.0}  # fmt: skip


def flipped(text: str) -> str:
    data = bytearray(base64.b64decode(text))
    data[0] ^= 1
    return base64.b64encode(bytes(data)).decode()


def _other_key() -> dict[str, Any]:
    payload = sealed_payload()
    payload["args"][1] = seal({"card": SECRET}, "1", KEY2, "a" * 24, "enc.Charge")
    return payload


def _moved() -> dict[str, Any]:
    payload = sealed_payload()
    payload["jid"] = "b" * 24  # the envelope of job a.., pasted into job b..
    return payload


def _relabelled() -> dict[str, Any]:
    payload = sealed_payload()
    payload["class"] = "enc.Once"
    return payload


UNOPENABLE: list[tuple[str, Any, str]] = [
    ("unknown key version", lambda: sealed_payload(key="9"), "key version '9'"),
    ("tampered tag", lambda: (p := sealed_payload(), p["args"][1].update(tag=flipped(p["args"][1]["tag"])))[0],
     "does not open"),
    ("tampered ciphertext", lambda: (p := sealed_payload(), p["args"][1].update(ct=flipped(p["args"][1]["ct"])))[0],
     "does not open"),
    ("sealed with another key", _other_key, "does not open"),
    ("moved to another jid", _moved, "does not open"),
    ("moved to another class", _relabelled, "does not open"),
    ("plaintext last argument", lambda: {**sealed_payload(), "args": [5, {"card": "x"}]}, "not a django-wurk"),
    ("Sidekiq Enterprise blob", lambda: {**sealed_payload(), "args": [5, "BAhTOhFTaWRla2lxOjpFbmMI"]},
     "not a django-wurk"),
    ("no arguments", lambda: {**sealed_payload(), "args": []}, "no argument"),
    ("key not text", lambda: sealed_payload(key=1), "names no key version"),
    ("iv not base64", lambda: sealed_payload(iv="!!!"), "'iv' is not valid base64"),
    ("iv a number", lambda: sealed_payload(iv=12), "'iv' is not base64 text"),
    ("short iv", lambda: sealed_payload(iv=base64.b64encode(b"x" * 8).decode()), "must be 12 bytes"),
    ("short tag", lambda: sealed_payload(tag=base64.b64encode(b"x" * 4).decode()), "tag 16 bytes"),
    ("ct null", lambda: sealed_payload(ct=None), "'ct' is not base64 text"),
    ("huge ct", lambda: sealed_payload(ct=base64.b64encode(os.urandom(3_000_000)).decode()), "does not open"),
    ("format 2", lambda: sealed_payload(**{MARKER: 2}), "not a django-wurk"),
    ("jid not text", lambda: {**sealed_payload(), "jid": 5}, "text jid"),
    ("jid with a newline", lambda: {**sealed_payload(), "jid": "a\nb"}, "without newlines"),
]  # fmt: skip


@pytest.mark.parametrize(
    "make, reason", [(m, why) for _, m, why in UNOPENABLE], ids=[n for n, _, _ in UNOPENABLE]
)
def test_an_envelope_that_does_not_open_is_dead_at_once(
    wurk: Wurk, r: Any, running: Any, make: Any, reason: str
) -> None:
    payload = make()
    raw = wire.dumps(payload).encode()
    r.sadd("queues", "default")
    r.lpush("queue:default", raw)
    running()
    wait_for(lambda: r.zcard(keys.DEAD) == 1)
    [entry] = dead(r)
    assert entry["error_class"] == "UndecryptableJob" and reason in entry["error_message"]
    assert entry["args"] == payload["args"] and entry["retry_count"] == 0
    assert r.zcard(keys.RETRY) == 0 and received == []
    assert not leaks(everything_in_redis(r))


def test_an_undecryptable_job_is_kept_even_with_retry_false(wurk: Wurk, r: Any, running: Any) -> None:
    payload = {**sealed_payload(job_class="enc.Once"), "retry": False}
    payload["args"] = [seal("x", "7", KEY1, payload["jid"], "enc.Once")]
    r.lpush("queue:default", wire.dumps(payload))
    running()
    wait_for(lambda: r.zcard(keys.DEAD) == 1)
    assert "key version '7'" in dead(r)[0]["error_message"] and received == []


def test_restoring_the_key_lets_a_dead_job_run_again(
    wurk: Wurk, r: Any, running: Any, test_config: Config
) -> None:
    wurk.configure(test_config.with_section(EncryptionSettings(encryption_keys=(("2", KEY2),))))
    charge.perform_async(1, {"card": SECRET})
    wurk.configure(test_config)  # version 2 rotated out too early
    worker = running()
    wait_for(lambda: r.zcard(keys.DEAD) == 1)
    worker.stop()
    assert received == []

    wurk.configure(
        test_config.with_section(
            EncryptionSettings(encryption_keys=(("1", KEY1), ("2", KEY2)), encryption_active="1")
        )
    )
    [entry] = list(DeadSet())
    entry.retry()
    running()
    wait_for(lambda: received)
    assert received == [[1, {"card": SECRET}]]


# Settings -------------------------------------------------------------------------------


def test_keys_are_read_from_raw_bytes_base64_and_the_environment_form() -> None:
    b1, b2 = base64.b64encode(KEY1).decode(), base64.urlsafe_b64encode(KEY2).decode()
    keys = EncryptionSettings(encryption_keys={1: KEY1, "v2": b2}, encryption_active="v2")
    assert keys.key("1") == KEY1 and keys.key("v2") == KEY2
    assert keys.version == "v2"
    env = Config.from_mapping({"ENCRYPTION_KEYS": f"1:{b1},\n2:{b2}\n", "ENCRYPTION_ACTIVE": "2"}, SETTINGS)
    read = env.section(EncryptionSettings)
    assert read.encryption_keys == (("1", KEY1), ("2", KEY2)) and read.encryption_active == "2"
    assert EncryptionSettings(encryption_keys={3: KEY1}).version == "3"  # the only key
    assert b1 not in repr(env) and "encryption_keys" not in repr(env)
    assert b1 not in repr(read) and "encryption_keys" not in repr(read)


@pytest.mark.parametrize(
    "values, setting, message",
    [
        ({"ENCRYPTION_KEYS": {1: b"x" * 31}}, "ENCRYPTION_KEYS", "is 31 bytes"),
        ({"ENCRYPTION_KEYS": {1: base64.b64encode(b"x" * 16).decode()}}, "ENCRYPTION_KEYS", "is 16 bytes"),
        ({"ENCRYPTION_KEYS": {1: "not base64!"}}, "ENCRYPTION_KEYS", "not base64"),
        ({"ENCRYPTION_KEYS": {1: 12345}}, "ENCRYPTION_KEYS", "bytes or base64 text"),
        ({"ENCRYPTION_KEYS": "no-version-here"}, "ENCRYPTION_KEYS", "version:base64key"),
        ({"ENCRYPTION_KEYS": {"a b": KEY1}}, "ENCRYPTION_KEYS", "key version must be"),
        ({"ENCRYPTION_KEYS": [1, 2]}, "ENCRYPTION_KEYS", "expected a dict"),
        ({"ENCRYPTION_KEYS": {1: KEY1, "1": KEY2}}, "ENCRYPTION_KEYS", "given twice"),
        ({"ENCRYPTION_KEYS": {1: KEY1, 2: KEY2}}, "ENCRYPTION_ACTIVE", "several"),
        ({"ENCRYPTION_KEYS": {1: KEY1}, "ENCRYPTION_ACTIVE": "2"}, "ENCRYPTION_ACTIVE", "has no key"),
        ({"ENCRYPTION_ACTIVE": "1"}, "ENCRYPTION_ACTIVE", "has no key"),
    ],
)
def test_bad_key_settings_name_the_setting_and_never_show_the_key(
    values: dict[str, Any], setting: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Config.from_mapping(values, SETTINGS)
    assert info.value.setting == setting
    for key in (KEY1, KEY2):
        assert base64.b64encode(key).decode() not in str(info.value) and repr(key) not in str(info.value)


def test_a_key_written_where_its_version_goes_is_not_quoted() -> None:
    b1 = base64.b64encode(KEY1).decode()
    with pytest.raises(ConfigError) as info:
        Config.from_mapping({"ENCRYPTION_KEYS": f"{b1}:1"}, SETTINGS)
    assert b1 not in str(info.value)


def test_check_reports_encrypted_jobs_without_keys_and_bad_keys(
    clean_environment: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_wurk.checks import check_encryption, check_settings

    settings.WURK = {}
    error, _ = check_encryption()
    assert error.id == "django_wurk.E004" and "WURK['ENCRYPTION_KEYS']" in error.msg
    assert "enc.Charge" in error.msg and "enc.Decline" in error.msg

    settings.WURK = {"ENCRYPTION_KEYS": {1: base64.b64encode(KEY1).decode()}}
    [warning] = check_encryption()
    assert (
        warning.id == "django_wurk.W002" and "enc.Unique" in warning.msg and "enc.Charge" not in warning.msg
    )
    assert check_settings() == []

    monkeypatch.setenv("WURK_ENCRYPTION_KEYS", "1:" + base64.b64encode(b"short").decode())
    [error] = check_settings()
    assert "ENCRYPTION_KEYS" in error.msg and "is 5 bytes" in error.msg


def test_keys_from_a_secret_file(
    clean_environment: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from django_wurk.conf import build_config

    secret = tmp_path / "keys"
    secret.write_text(f"1:{base64.b64encode(KEY1).decode()}\n2:{base64.b64encode(KEY2).decode()}\n")
    monkeypatch.setenv("WURK_ENCRYPTION_KEYS_FILE", str(secret))
    monkeypatch.setenv("WURK_ENCRYPTION_ACTIVE", "2")
    config = build_config()
    read = config.section(EncryptionSettings)
    assert read.key("1") == KEY1 and read.encryption_active == "2"


def test_runwurk_refuses_to_start_with_a_short_key_and_does_not_print_it(redis_url: str) -> None:
    from tests.test_runwurk import start

    short = base64.b64encode(b"sixteen byte key").decode()
    proc = start(redis_url, WURK_ENCRYPTION_KEYS=f"1:{short}")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "WURK['ENCRYPTION_KEYS']" in stderr and "is 16 bytes" in stderr and short not in stderr


def test_without_the_cryptography_package_a_push_says_what_to_install(
    wurk: Wurk, r: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(EncryptionError, match=r"django-wurk\[encryption\]"):
        charge.perform_async(1, {"card": SECRET})
    assert r.llen("queue:default") == 0


def test_check_reports_a_missing_cryptography_package(
    clean_environment: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from django_wurk.checks import check_encryption

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "cryptography" else real(name, *a)
    )
    settings.WURK = {"ENCRYPTION_KEYS": {1: base64.b64encode(KEY1).decode()}}
    ids = [e.id for e in check_encryption()]
    assert "django_wurk.E005" in ids
