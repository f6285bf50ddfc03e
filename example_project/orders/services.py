"""What the views, the admin and ``demo_seed`` do with orders, in one place."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from django_wurk import Batch
from orders.jobs import (
    ImportSummary,
    call_shipping_api,
    import_order_row,
    nightly_report,
    send_confirmation_email,
)
from orders.models import Order

REPORT_DELAY = 30  # seconds: "nightly" is a stretch, but you do not want to wait a night


class OrderRolledBack(Exception):
    """Raised on purpose after the jobs were enqueued, so the whole transaction rolls back."""

    def __init__(self, email_jid: str | None, shipping_jid: str | None) -> None:
        super().__init__("simulated failure after enqueueing: the order is rolled back")
        self.email_jid = email_jid
        self.shipping_jid = shipping_jid


@dataclass(frozen=True)
class PlacedOrder:
    order: Order
    email_jid: str | None
    shipping_jid: str | None


def place_order(
    *, customer_email: str, item: str, quantity: int, fail_after_enqueue: bool = False
) -> PlacedOrder:
    """Create the order and enqueue its jobs in one transaction.

    ``perform_async`` returns the jid at once, but django-wurk pushes the job to Redis only
    when this transaction commits (``WURK["ENQUEUE"] = "on_commit"``, the default). So the
    worker always finds the order row, and if anything below fails, the order and its jobs
    vanish together: ``fail_after_enqueue`` shows that by raising ``OrderRolledBack``.
    """
    with transaction.atomic():
        order = Order.objects.create(customer_email=customer_email, item=item, quantity=quantity)
        email_jid = send_confirmation_email.perform_async(order.pk)
        shipping_jid = call_shipping_api.perform_async(order.pk)
        if fail_after_enqueue:
            raise OrderRolledBack(email_jid, shipping_jid)
    return PlacedOrder(order, email_jid, shipping_jid)


def resend_confirmations(order_ids: list[int]) -> list[str | None]:
    """Enqueue the confirmation email again for these orders (the admin action)."""
    return send_confirmation_email.perform_bulk([(pk,) for pk in order_ids])


def schedule_report(delay: int = REPORT_DELAY) -> str | None:
    """Schedule the nightly report for today to run in ``delay`` seconds; returns the jid."""
    return nightly_report.perform_in(delay, timezone.localdate().isoformat())


@dataclass(frozen=True)
class StartedImport:
    batch: Batch
    rows: int


def import_orders(text: str, notify: str, description: str = "") -> StartedImport:
    """Import ``email,item,quantity`` lines as a batch; ``notify`` gets the summary email.

    The batch and its jobs are written in one step when the ``jobs()`` block ends (here,
    inside a transaction: at its commit). Each line is a job; when all have run, successes
    and failures alike, ``ImportSummary.on_complete`` runs once, on a worker.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    batch = Batch(description=description or f"{len(lines)} order(s), {timezone.now():%Y-%m-%d %H:%M}")
    batch.on("complete", ImportSummary, {"email": notify})
    with transaction.atomic(), batch.jobs():
        for number, line in enumerate(lines, start=1):
            import_order_row.perform_async(number, line)
    return StartedImport(batch, len(lines))
