"""A feature's settings live on the feature (``Feature.settings``), not in the engine's Config.

The engine's ``Config`` knows its own keys only; each feature of ``DEFAULT`` brings a class
whose fields are its ``WURK`` keys, read by the same rules (the environment's text becomes
the field's type, a bad value names its key) and found again through ``config.section``.
"""

from __future__ import annotations

import dataclasses

import pytest

from django_wurk.core.config import Config, ConfigError, UnknownSetting, key_names, setting_names
from django_wurk.core.features import DEFAULT, SETTINGS
from django_wurk.core.features.batches import BatchSettings
from django_wurk.core.features.cancel import CancelSettings
from django_wurk.core.features.encryption import EncryptionSettings
from django_wurk.core.features.status import StatusSettings
from django_wurk.core.features.unique import UniqueSettings


def test_every_feature_setting_belongs_to_one_feature_and_none_to_the_engine() -> None:
    assert set(SETTINGS) == {
        BatchSettings,
        StatusSettings,
        EncryptionSettings,
        UniqueSettings,
        CancelSettings,
    }
    assert tuple(f.settings for f in DEFAULT if f.settings is not None) == SETTINGS
    engine = set(key_names(Config))
    owners: dict[str, type] = {}
    for kind in SETTINGS:
        for key in key_names(kind):
            assert key not in engine, f"{key} is both the engine's and {kind.__name__}'s"
            assert key not in owners, f"{key} is {owners[key].__name__}'s and {kind.__name__}'s"
            owners[key] = kind
    assert {"BATCH_LINGER", "STATUS_RETENTION", "ENCRYPTION_KEYS", "UNIQUE_DIGEST"} <= set(owners)
    assert "SECTIONS" not in setting_names(SETTINGS)  # the holder is not a key
    assert setting_names(SETTINGS) == key_names(Config) + list(owners)


def test_a_features_keys_are_read_from_text_like_the_engines() -> None:
    config = Config.from_mapping(
        {"BATCH_LINGER": "60", "STATUS_RETENTION": "7", "CONCURRENCY": "3"}, SETTINGS
    )
    assert config.concurrency == 3
    assert config.section(BatchSettings).batch_linger == 60
    assert config.section(BatchSettings).batch_expires_in == BatchSettings().batch_expires_in
    assert config.section(StatusSettings).status_retention == 7
    # A feature none of whose keys is set keeps its defaults and is not stored.
    assert config.section(EncryptionSettings) == EncryptionSettings()
    assert Config.from_mapping({}, SETTINGS) == Config()


@pytest.mark.parametrize(
    ("values", "setting"),
    [({"BATCH_LINGER": "soon"}, "BATCH_LINGER"), ({"STATUS_RETENTION": 0}, "STATUS_RETENTION")],
)
def test_a_bad_feature_value_names_its_key(values: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_mapping(values, SETTINGS)
    assert info.value.setting == setting


def test_a_typo_is_matched_against_the_features_keys_too() -> None:
    with pytest.raises(UnknownSetting, match="BATCH_LINGER"):
        Config.from_mapping({"BATCH_LINGR": 5}, SETTINGS)
    # Without the feature that owns it, a feature's key is unknown to the engine alone.
    with pytest.raises(UnknownSetting):
        Config.from_mapping({"BATCH_LINGER": 5})


def test_with_section_replaces_one_features_settings_and_keeps_the_rest() -> None:
    config = Config(concurrency=2).with_section(BatchSettings(batch_linger=5)).with_section(StatusSettings(9))
    again = config.with_section(BatchSettings(batch_linger=6))
    assert (
        again.section(BatchSettings).batch_linger == 6 and again.section(StatusSettings).status_retention == 9
    )
    assert again.concurrency == 2 and len(again.sections) == 2
    # replace() and capsule narrowing keep them.
    assert dataclasses.replace(again, concurrency=4).section(StatusSettings).status_retention == 9
    assert again.replace(tag="x").section(BatchSettings).batch_linger == 6


def test_django_settings_reach_the_features(settings: object, clean_environment: None) -> None:
    from django_wurk.conf import build_config

    settings.WURK = {"BATCH_EXPIRES_IN": 600}  # type: ignore[attr-defined]
    assert build_config().section(BatchSettings).batch_expires_in == 600
