"""The shop page: place an order, watch its jobs change it, and try a django.tasks task."""

import json

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from orders.forms import ImportForm, OrderForm
from orders.models import Order
from orders.services import REPORT_DELAY, OrderRolledBack, import_orders, place_order, schedule_report
from orders.tasks import recalculate_totals

try:  # Django 6+
    from django.tasks import TaskResultStatus
    from django.tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import TaskResultStatus  # type: ignore[no-redef]
    from django_tasks.exceptions import (  # type: ignore[no-redef]
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )

RECENT = 15


def _recent_orders() -> list[Order]:
    return list(Order.objects.all()[:RECENT])


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return _page(request, OrderForm())


def _page(
    request: HttpRequest, form: OrderForm, status: int = 200, import_form: ImportForm | None = None
) -> HttpResponse:
    context = {
        "form": form,
        "import_form": import_form or ImportForm(),
        "orders": _recent_orders(),
        "report_delay": REPORT_DELAY,
    }
    return render(request, "orders/index.html", context, status=status)


@require_GET
def table(request: HttpRequest) -> HttpResponse:
    """The orders table alone; the page re-fetches it every two seconds."""
    return render(request, "orders/_table.html", {"orders": _recent_orders()})


@require_POST
def place(request: HttpRequest) -> HttpResponse:
    form = OrderForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        placed = place_order(**form.cleaned_data)
    except OrderRolledBack as rolled_back:
        messages.warning(
            request,
            "The order was rolled back: an error was raised inside the transaction after "
            f"the jobs were enqueued (email jid {rolled_back.email_jid}, shipping jid "
            f"{rolled_back.shipping_jid}). No order row was saved and neither job was pushed "
            "to Redis, so no email will be sent.",
        )
        return redirect("orders:index")
    messages.success(
        request,
        f"Order #{placed.order.pk} placed. Its confirmation email (jid {placed.email_jid}) and "
        f"shipping call (jid {placed.shipping_jid}) were pushed to Redis when the transaction "
        "committed; watch the table below and the worker's log.",
    )
    return redirect("orders:index")


@require_POST
def import_view(request: HttpRequest) -> HttpResponse:
    """Import orders as a batch: one job per line, a summary email when all have run."""
    form = ImportForm(request.POST)
    if not form.is_valid():
        return _page(request, OrderForm(), status=400, import_form=form)
    started = import_orders(form.cleaned_data["lines"], notify=form.cleaned_data["notify"])
    bid = started.batch.bid
    try:
        progress = reverse("admin:django_wurk_dashboard_batch", kwargs={"bid": bid})
    except NoReverseMatch:
        progress = ""
    text = format_html(
        "Import started as batch {} ({} rows). When every row has run, a summary is emailed to {} "
        "(see the worker's log).",
        bid,
        started.rows,
        form.cleaned_data["notify"],
    )
    if progress:
        text = format_html('{} <a href="{}">Follow it on the dashboard</a>.', text, progress)
    messages.success(request, text)
    return redirect("orders:index")


@require_POST
def report(request: HttpRequest) -> HttpResponse:
    jid = schedule_report()
    messages.success(request, f"Scheduled the nightly report to run in {REPORT_DELAY} s (jid {jid}).")
    return redirect("orders:index")


@require_POST
def recalculate(request: HttpRequest) -> HttpResponse:
    result = recalculate_totals.enqueue()
    messages.success(request, f"Enqueued the django.tasks task recalculate_totals: result id {result.id}.")
    return redirect("orders:task_result", result_id=result.id)


@require_GET
def task_result(request: HttpRequest, result_id: str) -> HttpResponse:
    try:
        result = recalculate_totals.get_result(result_id)
    except (TaskResultDoesNotExist, TaskResultMismatch):
        raise Http404(f"no recalculate_totals result {result_id} (results are kept for a day)") from None
    context = {
        "result": result,
        "return_value": (
            json.dumps(result.return_value, indent=2, ensure_ascii=False)
            if result.status == TaskResultStatus.SUCCESSFUL
            else None
        ),
        "last_error": result.errors[-1] if result.errors else None,
    }
    return render(request, "orders/task_result.html", context)
