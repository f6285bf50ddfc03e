"""One page with a button per demo job; each button POSTs and comes back with the jid(s)."""

import logging
from collections.abc import Callable

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from orders.services import REPORT_DELAY, schedule_report

from demo.jobs import Slow, flaky, quick

logger = logging.getLogger(__name__)

SLOW_SECONDS = 5
BULK_COUNT = 100


def _jid(jid: str | None) -> str:
    # perform_* return None when a client middleware decided not to push the job.
    return f"jid {jid}" if jid else "not pushed"


def _enqueue_quick() -> str:
    jid = quick.perform_async(1)
    return f"Enqueued a quick job ({_jid(jid)})."


def _enqueue_slow() -> str:
    jid = Slow.perform_async(SLOW_SECONDS)
    return f"Enqueued a slow job that sleeps {SLOW_SECONDS} s ({_jid(jid)})."


def _enqueue_flaky() -> str:
    jid = flaky.perform_async()
    return f"Enqueued a job that always fails and will be retried 3 times ({_jid(jid)})."


def _schedule_report() -> str:
    jid = schedule_report(REPORT_DELAY)  # orders.jobs.nightly_report, on the "reports" queue
    return f"Scheduled the nightly report to run in {REPORT_DELAY} s ({_jid(jid)})."


def _enqueue_bulk() -> str:
    jids = [jid for jid in quick.perform_bulk([(i,) for i in range(BULK_COUNT)]) if jid]
    shown = ", ".join(jids[:3])
    more = f" and {len(jids) - 3} more" if len(jids) > 3 else ""
    return f"Enqueued {len(jids)} quick jobs (jids {shown}{more})."


# action slug -> (button label, what the button does)
ACTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "quick": ("Enqueue quick job", _enqueue_quick),
    "slow": (f"Enqueue slow job ({SLOW_SECONDS} s)", _enqueue_slow),
    "flaky": ("Enqueue failing job", _enqueue_flaky),
    "report": (f"Schedule report in {REPORT_DELAY} s", _schedule_report),
    "bulk": (f"Enqueue {BULK_COUNT} quick jobs", _enqueue_bulk),
}


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    buttons = [(slug, label) for slug, (label, _) in ACTIONS.items()]
    return render(request, "demo/index.html", {"buttons": buttons})


@require_POST
def enqueue(request: HttpRequest, action: str) -> HttpResponse:
    try:
        _, do = ACTIONS[action]
    except KeyError:
        raise Http404(f"no such demo action: {action}") from None
    try:
        messages.success(request, do())
    except Exception as exc:  # the demo shows the error instead of a 500 page
        logger.exception("demo: %s failed", action)
        messages.error(request, f"Could not enqueue ({type(exc).__name__}): {exc}")
    return redirect("demo:index")
