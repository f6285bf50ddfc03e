"""An order in a tiny shop: placing one sends a confirmation email and books shipping."""

from django.db import models


class Order(models.Model):
    class Status(models.TextChoices):
        NEW = "new", "New"  # placed; the confirmation email is on its way
        CONFIRMED = "confirmed", "Confirmed"  # the confirmation email was sent
        SHIPPED = "shipped", "Shipped"  # the shipping API accepted it

    customer_email = models.EmailField()
    item = models.CharField(max_length=100)
    quantity = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.NEW)
    created_at = models.DateTimeField(auto_now_add=True)
    confirmation_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"Order #{self.pk}: {self.quantity} x {self.item} for {self.customer_email}"
