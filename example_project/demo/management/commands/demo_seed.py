"""Give a freshly started worker something to show: one of each demo job, one order, and
something on every dashboard tab: a periodic schedule (edited in the admin), jobs waiting on
a rate limiter, and a tracked job."""

from typing import Any

from django.core.management.base import BaseCommand
from orders.services import place_order, schedule_report

from demo.jobs import Slow, export, flaky, geocode, quick
from django_wurk.models import Schedule

REPORT_DELAY = 10


class Command(BaseCommand):
    help = (
        "Enqueue one of each demo job (quick, slow, flaky, a tracked export, rate-limited "
        f"geocoding, and the nightly report in {REPORT_DELAY} s), place an order, which enqueues "
        "its confirmation email and shipping call when it commits, and add a periodic schedule."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        placed = place_order(customer_email="seed@example.com", item="Coffee beans (1 kg)", quantity=2)
        enqueued = [
            ("quick", quick.perform_async(0)),
            ("slow (2 s)", Slow.perform_async(2)),
            ("flaky (always fails)", flaky.perform_async()),
            (f"nightly_report (in {REPORT_DELAY} s)", schedule_report(REPORT_DELAY)),
            (f"send_confirmation_email (order #{placed.order.pk})", placed.email_jid),
            (f"call_shipping_api (order #{placed.order.pk})", placed.shipping_jid),
            ("export (tracked: see its status page)", export.perform_async(rows=8)),
            *(
                (f"geocode #{i} (2 at a time: the Limits tab)", geocode.perform_async(f"{i} Main St"))
                for i in range(4)
            ),
        ]
        # A schedule as an operator would add it in the admin; the leader fires it every minute.
        Schedule.objects.update_or_create(
            name="Every minute: quick",
            defaults={"cron": "* * * * *", "job": "demo.jobs.quick", "args": [60], "kwargs": {}},
        )
        self.stdout.write(
            "seeded the periodic schedule 'Every minute: quick' (Periodic tab; admin: Periodic schedules)"
        )
        for name, jid in enqueued:
            self.stdout.write(f"seeded {name}: jid {jid or '(not pushed)'}")
