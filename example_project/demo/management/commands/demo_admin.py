"""Create the demo superuser, or reset its password if it already exists."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

USERNAME = "admin"
PASSWORD = "wurk-demo"  # demo only: printed by run.py on every start


class Command(BaseCommand):
    help = f"Create (or reset the password of) the demo superuser {USERNAME!r}."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=USERNAME)
        user.is_staff = True
        user.is_superuser = True
        user.is_active = True
        user.set_password(PASSWORD)
        user.save()
        self.stdout.write(f"{'Created' if created else 'Reset'} demo superuser {USERNAME!r}.")
