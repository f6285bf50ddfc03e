"""A ``django.tasks`` task, run by django-wurk's ``WurkBackend`` (see ``TASKS`` in the settings).

django-wurk imports every installed app's ``tasks`` module when a ``TASKS`` backend is
django-wurk's, so workers know this task. Each run is a Sidekiq job whose jid is the
``TaskResult`` id; the result (status, return value, errors) is kept in Redis.
"""

import logging
from typing import Any

from django.db.models import Count, Sum

from orders.models import Order

try:  # Django 6+
    from django.tasks import task
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]

logger = logging.getLogger(__name__)


@task()
def recalculate_totals() -> dict[str, Any]:
    """Orders and items per product, over every order; the return value is the task's result."""
    rows = (
        Order.objects.values("item").annotate(orders=Count("id"), quantity=Sum("quantity")).order_by("item")
    )
    items = {row["item"]: {"orders": row["orders"], "quantity": row["quantity"]} for row in rows}
    totals = {
        "orders": sum(v["orders"] for v in items.values()),
        "quantity": sum(v["quantity"] for v in items.values()),
        "items": items,
    }
    logger.info("recalculated totals: %d order(s), %d item(s)", totals["orders"], totals["quantity"])
    return totals
