"""Sidekiq Pro/Enterprise features (batches, unique jobs, limiters, periodic jobs, ...).

Each feature is one package here that exports a ``Feature`` value (``core/feature.py``):
what it plugs into an engine, where its middleware sits, the options it reads. Importing
one installs nothing; an engine is built from them (``Wurk(features=...)``, ``wurk.use``).

``DEFAULT`` is the set every engine of this package starts with (``django_wurk`` builds
the process's ``wurk`` from it), listed as their server middleware nest, outermost first.
The order comes from each feature's own ``Place`` (a test checks this list against it);
the list is here to be read. The features a setting turns on are added by the code that
reads the setting: periodic jobs and the election, history, metrics and the health port,
StatsD and tracing (``runwurk``, ``django_wurk.apps``), Celery's revoked record (its first
task), Django's connection handling (``runwurk``).
"""

from __future__ import annotations

from typing import Any

from django_wurk.core.feature import Feature
from django_wurk.core.features import (
    batches,
    cancel,
    collapse,
    encryption,
    expiring,
    limiters,
    status,
    timeouts,
    unique,
)

#: Outermost first: a rate-limited job is rescheduled before batches, unique or status see
#: it succeed; batches count a job once unique released its lock (a callback may push it
#: again); a push is collapsed (debounce, throttle) after unique's gate dropped a duplicate
#: and before status calls it enqueued; an expired job is skipped before status calls it
#: running or a timeout starts; a cancelled job ends at its start inside what records its
#: outcome, before a timeout starts; encryption opens the last argument for the job alone.
DEFAULT: tuple[Feature, ...] = (
    limiters.FEATURE,
    batches.FEATURE,
    unique.FEATURE,
    collapse.FEATURE,
    expiring.FEATURE,
    status.FEATURE,
    cancel.FEATURE,
    timeouts.FEATURE,
    encryption.FEATURE,
)

#: The settings classes of the DEFAULT features (``Feature.settings``): their keys are read
#: with the engine's own (``Config.from_mapping(values, SETTINGS)``).
SETTINGS: tuple[type[Any], ...] = tuple(f.settings for f in DEFAULT if f.settings is not None)

__all__ = ["DEFAULT", "SETTINGS"]
