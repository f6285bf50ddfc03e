"""The shop's background jobs. django-wurk finds this module because ``orders`` is an installed app.

Placing an order (``orders.services.place_order``) enqueues two of them inside the
transaction that creates the order; django-wurk pushes them to Redis only once that
transaction commits, so a worker never looks for an order that is not there yet.

Importing orders (``orders.services.import_orders``) is a batch: one job per row, and a
callback that emails a summary when every row has run.
"""

import logging
import random
from datetime import date
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Count, Sum
from django.utils import timezone

from django_wurk import BatchCallback, BatchStatus, job
from orders.models import Order

logger = logging.getLogger(__name__)

#: Seconds before a failed shipping call is tried again. The worker adds Sidekiq's jitter
#: (0 to 10 * (retry count + 1) seconds) and its poller picks the retry up within a couple
#: of seconds after that, so the retries show in the worker's log within a minute or so.
SHIPPING_RETRY_SECONDS = 2


@job(queue="default", retry=5)
def send_confirmation_email(order_id: int) -> None:
    """Email the customer that their order is confirmed, and note when it was sent."""
    try:
        order = Order.objects.get(pk=order_id)
    except Order.DoesNotExist:
        # Deleted since it was placed (enqueueing on commit means it did exist then).
        logger.warning("order #%s no longer exists; no confirmation email to send", order_id)
        return
    send_mail(
        subject=f"Your order #{order.pk} is confirmed",
        message=(
            f"Thank you for your order!\n\n"
            f"  {order.quantity} x {order.item}\n\n"
            f"It leaves our warehouse as soon as the carrier confirms the booking.\n"
        ),
        from_email=None,  # settings.DEFAULT_FROM_EMAIL
        recipient_list=[order.customer_email],
    )
    Order.objects.filter(pk=order.pk).update(confirmation_sent_at=timezone.now())
    # Only NEW becomes CONFIRMED: the shipping call may have marked it SHIPPED already.
    Order.objects.filter(pk=order.pk, status=Order.Status.NEW).update(status=Order.Status.CONFIRMED)
    logger.info("sent the confirmation email for order #%s to %s", order.pk, order.customer_email)


class ShippingAPIError(Exception):
    """The (simulated) shipping API did not take the request; worth trying again soon."""


def retry_soon(count: int, exc: BaseException) -> int | None:
    """``retry_in`` hook: retry a shipping outage after a few seconds, anything else as usual."""
    return SHIPPING_RETRY_SECONDS if isinstance(exc, ShippingAPIError) else None


@job(queue="default", retry=5, retry_in=retry_soon)
def call_shipping_api(order_id: int) -> None:
    """Book the parcel with a carrier's API, which fails about half the time in this demo.

    ``SHIPPING_FAILURE_RATE`` (settings, or the environment variable of that name) sets how
    often: 0 never fails, 1 always does. Five retries, then the dead set.
    """
    rate = float(getattr(settings, "SHIPPING_FAILURE_RATE", 0.5))
    if random.random() < rate:
        raise ShippingAPIError(
            f"shipping API answered 503 Service Unavailable for order #{order_id} "
            f"(simulated: it fails {rate:.0%} of the time); retrying in a few seconds"
        )
    if Order.objects.filter(pk=order_id).update(status=Order.Status.SHIPPED):
        logger.info("shipping API accepted order #%s; it is marked shipped", order_id)
    else:
        logger.warning("order #%s no longer exists; nothing to ship", order_id)


@job(queue="reports")
def nightly_report(day: str) -> dict[str, int]:
    """Count the orders placed on ``day`` (an ISO date), by status; returns the counts."""
    orders = Order.objects.filter(created_at__date=date.fromisoformat(day))
    by_status = dict(orders.values_list("status").annotate(n=Count("id")).order_by())
    items = orders.aggregate(total=Sum("quantity"))["total"] or 0
    counts = {"orders": sum(by_status.values()), "items": items, **by_status}
    details = ", ".join(f"{n} {status}" for status, n in sorted(by_status.items())) or "none"
    logger.info("nightly report for %s: %d order(s), %d item(s) (%s)", day, counts["orders"], items, details)
    return counts


# Order imports: one job per row, in one batch; when every row has run, a summary email ------


class ImportRowError(ValueError):
    """A row of an import that cannot become an order; not worth retrying."""


@job(queue="default", retry=0)
def import_order_row(line_number: int, line: str) -> None:
    """Create one order from one ``email,item,quantity`` line of an import.

    A bad line raises at once and, with ``retry=0``, goes straight to the dead set, where the
    dashboard shows it with its reason; the import's summary counts it as failed.
    """
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 3 or "@" not in fields[0] or not fields[2].isdigit() or int(fields[2]) < 1:
        raise ImportRowError(f"line {line_number}: expected 'email,item,quantity', got {line!r}")
    email, item, quantity = fields
    order = Order.objects.create(customer_email=email, item=item, quantity=int(quantity))
    logger.info("import line %d: created order #%s", line_number, order.pk)


class ImportSummary(BatchCallback):
    """Emails the import's summary once every row has run (``complete``: succeeded or died)."""

    def on_complete(self, status: BatchStatus, options: dict[str, Any]) -> None:
        imported = status.total - status.pending
        failed = len(status.dead_jids)
        lines = [
            f"Your order import “{status.description}” is done.",
            "",
            f"  rows:     {status.total}",
            f"  imported: {imported}",
            f"  failed:   {failed}",
        ]
        if failed:
            lines += ["", "The failed rows are in the dead set, with the reason for each (dashboard: Dead)."]
        send_mail(
            subject=f"Order import: {imported} imported, {failed} failed",
            message="\n".join(lines) + "\n",
            from_email=None,
            recipient_list=[options["email"]],
        )
        logger.info("import %s complete: %d imported, %d failed", status.bid, imported, failed)
