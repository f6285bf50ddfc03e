"""Enqueue one of each demo job, so a freshly started worker has something to show."""

from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from demo.jobs import Slow, flaky, nightly_report, quick


class Command(BaseCommand):
    help = "Enqueue one of each demo job (quick, slow, flaky, and the nightly report in 10 s)."

    def handle(self, *args: Any, **options: Any) -> None:
        today = timezone.localdate().isoformat()
        enqueued = [
            ("quick", quick.perform_async(0)),
            ("slow (2 s)", Slow.perform_async(2)),
            ("flaky (always fails)", flaky.perform_async()),
            ("nightly_report (in 10 s)", nightly_report.perform_in(10, today)),
        ]
        for name, jid in enqueued:
            self.stdout.write(f"seeded {name}: jid {jid or '(not pushed)'}")
