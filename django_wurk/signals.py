"""Django signals django-wurk sends."""

from django.dispatch import Signal

__all__ = ["push_failed"]

#: Sent when jobs pushed after a commit could not reach Redis after every retry, or were
#: still waiting for a retry when the process exited. Arguments: ``payloads`` (list of job
#: dicts), ``at`` (epoch or None), ``error`` (the last exception). With
#: ``WURK["ENQUEUE"] = "outbox"`` nothing is lost: the rows stay for the relay.
push_failed = Signal()
