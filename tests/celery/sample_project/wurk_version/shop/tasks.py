from django_wurk.celery import shared_task

from . import supplier


@shared_task(
    autoretry_for=(ConnectionError,), retry_backoff=1, retry_backoff_max=8, retry_jitter=False, max_retries=5
)
def sync_stock(sku):
    return {"sku": sku, "level": supplier.stock_level(sku)}


@shared_task(bind=True, max_retries=3, default_retry_delay=60, queue="mail")
def send_receipt(self, order_id):
    try:
        supplier.send_mail(order_id)
    except supplier.MailServerDown as exc:
        raise self.retry(exc=exc, countdown=1) from exc
    return f"receipt for order {order_id} sent after {self.request.retries} retries"


@shared_task
def total(prices):
    return sum(prices)


@shared_task(queue="reports")
def sales_report(period="daily"):
    return f"{period} report"


@shared_task(ignore_result=True)
def expire_carts(days):
    return days


@shared_task
def refresh_exchange_rates():
    return "rates"
