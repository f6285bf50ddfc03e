"""Give a freshly started worker something to show: one of each demo job, and one order."""

from typing import Any

from django.core.management.base import BaseCommand
from orders.services import place_order, schedule_report

from demo.jobs import Slow, flaky, quick

REPORT_DELAY = 10


class Command(BaseCommand):
    help = (
        "Enqueue one of each demo job (quick, slow, flaky, and the nightly report in "
        f"{REPORT_DELAY} s) and place an order, which enqueues its confirmation email and "
        "shipping call when it commits."
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
        ]
        for name, jid in enqueued:
            self.stdout.write(f"seeded {name}: jid {jid or '(not pushed)'}")
