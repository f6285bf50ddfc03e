"""ActiveJob's argument encoding, both ways (no Ruby needed; tests/interop runs the real thing)."""

from __future__ import annotations

import pytest

from django_wurk.core import activejob, wire
from tests.vectors import raw


def test_deserialize_undoes_each_marker() -> None:
    encoded = [
        {"a": 1, "_aj_symbol_keys": ["a"]},
        {"x": {"y": 2, "_aj_symbol_keys": []}, "_aj_hash_with_indifferent_access": True},
        {"_aj_globalid": "gid://app/User/1"},
        {"_aj_serialized": "ActiveJob::Serializers::TimeWithZoneSerializer", "value": "2026-01-01T00:00:00Z"},
        {"_aj_serialized": "MoneySerializer", "cents": 5},
        [1, {"b": None, "_aj_symbol_keys": ["b"]}],
    ]
    assert activejob.deserialize(encoded) == [
        {"a": 1},
        {"x": {"y": 2}},
        "gid://app/User/1",
        "2026-01-01T00:00:00Z",
        {"cents": 5},
        [1, {"b": None}],
    ]


def test_ruby_keyword_arguments_become_python_keywords() -> None:
    payload = {
        "class": activejob.RAILS_WRAPPER,
        "args": [{"job_class": "J", "arguments": ["p", {"k": 1, "_aj_ruby2_keywords": ["k"]}]}],
    }
    assert activejob.arguments(payload) == (["p"], {"k": 1})
    assert activejob.arguments({"class": "Plain", "args": [1]}) == ([1], {})


def test_wrap_writes_rails_shape_and_keeps_options() -> None:
    payload = {"retry": 3, "queue": "mailers", "tags": ["t"], "args": ["w", {"n": 1}], "class": "HelloJob"}
    wrapped = activejob.wrap(payload)
    assert list(wrapped) == ["retry", "queue", "tags", "args", "class", "wrapped"]
    assert wrapped["class"] == activejob.RAILS_WRAPPER and wrapped["wrapped"] == "HelloJob"
    [data] = wrapped["args"]
    assert data["job_class"] == "HelloJob" and data["queue_name"] == "mailers"
    assert data["arguments"] == ["w", {"n": 1, "_aj_symbol_keys": []}]
    assert data["enqueued_at"].endswith("Z") and len(data["job_id"]) == 36
    # The real Rails 6.1 job hash has exactly these keys.
    rails = wire.loads(raw("queue_job_activejob.json"))["args"][0]
    assert set(data) == set(rails)


def test_reserved_keys_are_refused() -> None:
    with pytest.raises(TypeError, match=r"args\[0\] uses the key '_aj_symbol_keys'"):
        activejob.serialize([{"_aj_symbol_keys": []}])


def test_a_non_wrapper_or_malformed_wrapper_is_not_activejob() -> None:
    assert activejob.job_name({"class": "X", "args": []}) is None
    assert activejob.job_name({"class": activejob.SIDEKIQ_WRAPPER, "args": ["not a hash"]}) is None
    assert activejob.job_name({"class": activejob.SIDEKIQ_WRAPPER, "args": [{"job_class": "Y"}]}) == "Y"
