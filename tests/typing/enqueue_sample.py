"""Checked by mypy and pyright in tests/test_typed_enqueue.py, never run or collected.

Each line that must be a type error ends with ``# error``; every other line must check
clean. The enqueue verbs take the job's own parameters (``ParamSpec``), so a wrong call
is found in the editor, before any worker sees it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django_wurk import Job, job


@job
def send_welcome(user_id: int, *, template: str = "welcome") -> None: ...


@job(queue="mailers", retry=5)
async def send_digest(user_id: int, day: str) -> None: ...


class Invoice(Job):
    def perform(self, invoice_id: int, *, reminder: bool = False) -> None: ...


when = datetime.now(UTC)

# Right calls.
send_welcome.perform_async(1)
send_welcome.perform_async(user_id=1, template="promo")
send_welcome.perform_in(60, 1)
send_welcome.perform_in(timedelta(minutes=5), user_id=1)
send_welcome.perform_at(when, 1, template="x")
send_welcome.set(queue="low").perform_async(user_id=1)
send_welcome.set(queue="low").set(retry=False).perform_in(5, 1)
send_welcome(1)
send_digest.perform_async(1, "monday")
send_digest.perform_async(user_id=1, day="monday")
Invoice.perform_async(1)
Invoice.perform_async(invoice_id=1, reminder=True)
Invoice.perform_in(5, 1)
Invoice.perform_at(when, invoice_id=1)
Invoice.set(queue="billing").perform_async(1, reminder=False)
jid: str | None = send_welcome.perform_async(1)

# Wrong calls.
send_welcome.perform_async("1")  # error
send_welcome.perform_async()  # error
send_welcome.perform_async(1, 2)  # error
send_welcome.perform_async(1, nope=True)  # error
send_welcome.perform_async(user_id="1")  # error
send_welcome.perform_in(60, "1")  # error
send_welcome.perform_in(60)  # error
send_welcome.perform_at(when, template=1)  # error
send_welcome.set(queue="low").perform_async("1")  # error
send_welcome.set(queue="low").perform_in(5, user_id=None)  # error
send_digest.perform_async(1)  # error
send_digest.perform_async(1, day=2)  # error
Invoice.perform_async("1")  # error
Invoice.perform_async(1, reminder="yes")  # error
Invoice.perform_in(5)  # error
Invoice.perform_at(when, 1, 2)  # error
Invoice.set(queue="billing").perform_async(invoice="1")  # error
not_a_jid: int = send_welcome.perform_async(1)  # error
