"""The engine: Sidekiq's wire format, the client, the worker and the data API, without Django.

Nothing under ``django_wurk.core`` imports Django (``make lint`` enforces it with an
import-linter contract), so the engine can be read, tested and reasoned about on its own;
the Django glue one level up (settings, on-commit enqueue, the outbox, the dashboard,
``runwurk``) builds a :class:`~django_wurk.core.config.Config` and drives it.
See docs/architecture.md.
"""
