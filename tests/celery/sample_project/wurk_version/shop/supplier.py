"""Stands in for the shop's supplier and mail APIs: the first call for each key fails, as a
flaky network does, and the next one works (the worker's cache remembers the first)."""

from django.core.cache import cache


class MailServerDown(Exception):
    pass


def stock_level(sku):
    if cache.add(f"stock-called:{sku}", True):
        raise ConnectionError(f"supplier timed out for {sku}")
    return 42


def send_mail(order_id):
    if cache.add(f"mail-called:{order_id}", True):
        raise MailServerDown("421 try again later")
