from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from orders.models import Order
from orders.services import resend_confirmations


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "customer_email",
        "item",
        "quantity",
        "status",
        "created_at",
        "confirmation_sent_at",
    )
    list_filter = ("status", "created_at")
    search_fields = ("customer_email", "item")
    readonly_fields = ("created_at", "confirmation_sent_at")
    actions = ["resend_confirmation"]

    @admin.action(description="Resend confirmation")
    def resend_confirmation(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        jids = [jid for jid in resend_confirmations(list(queryset.values_list("pk", flat=True))) if jid]
        self.message_user(
            request,
            f"Enqueued {len(jids)} confirmation email(s); the worker's log shows them being sent.",
            messages.SUCCESS,
        )
