"""The engine's public verbs for tests and processes: ``override()`` and ``reset()``.

Each test builds its own ``Wurk`` so that what it swaps, closes and restores is visible
without disturbing the global engine the other tests use.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_wurk import Config, Wurk


class Tag:
    def __call__(self, *args: Any) -> Any:
        return args[-1]()


class Other(Tag):
    pass


def connection_ids(engine: Wurk) -> set[int]:
    return {int(c["id"]) for c in engine.redis.client_list()}


def test_override_puts_back_the_configuration_and_the_connections(test_config: Config) -> None:
    engine = Wurk()
    engine.configure(test_config)
    outer = engine.redis
    outer_id = outer.client_id()
    inner_config = test_config.replace(concurrency=7)
    with engine.override(inner_config) as same:
        assert same is engine and engine.config is inner_config
        inner_id = engine.redis.client_id()
        assert engine.redis is not outer and inner_id != outer_id
    assert engine.config is test_config
    assert engine.redis is outer  # the connections of before, still open, not new ones
    ids = connection_ids(engine)
    assert outer_id in ids and inner_id not in ids  # the one opened inside was closed
    engine.reset()


def test_override_puts_back_a_loader_and_builds_nothing_early(test_config: Config) -> None:
    built: list[Config] = []

    def loader() -> Config:
        built.append(test_config.replace(tag="loaded"))
        return built[-1]

    engine = Wurk()
    engine.set_config_loader(loader)
    with engine.override(test_config):
        assert engine.config is test_config
    assert built == []  # the loader was put back, not called
    assert engine.config.tag == "loaded"


def test_override_undoes_middleware_and_handlers_added_inside_even_on_error(test_config: Config) -> None:
    engine = Wurk()
    engine.client_middleware.add(Tag)
    engine.error_handlers.append(print)
    with pytest.raises(RuntimeError, match="boom"), engine.override(test_config):
        engine.client_middleware.add(Other)
        engine.client_middleware.remove(Tag)
        engine.server_middleware.add(Other)
        engine.error_handlers.clear()
        engine.death_handlers.append(print)
        raise RuntimeError("boom")
    assert list(engine.client_middleware) and Tag in engine.client_middleware
    assert Other not in engine.client_middleware and len(engine.server_middleware) == 0
    assert engine.error_handlers == [print] and engine.death_handlers == []
    assert engine.config is not test_config  # the default configuration of before, again


def test_reset_closes_the_connections_and_keeps_a_configured_configuration(test_config: Config) -> None:
    engine = Wurk()
    engine.set_config_loader(lambda: pytest.fail("configure() replaced the loader"))
    engine.configure(test_config)
    before = engine.redis
    before_id = before.client_id()
    engine.reset()
    assert engine.config is test_config
    assert engine.redis is not before
    assert before_id not in connection_ids(engine)
    engine.reset()


def test_reset_builds_a_loaded_configuration_again(test_config: Config) -> None:
    tags = iter(["first", "second"])
    engine = Wurk()
    engine.set_config_loader(lambda: test_config.replace(tag=next(tags)))
    assert engine.config.tag == "first"
    engine.reset()
    assert engine.config.tag == "second"  # settings changed since are read again
