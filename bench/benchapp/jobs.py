"""The benchmark's jobs. Wire names match bench/ruby/jobs.rb, so Sidekiq runs the same payloads."""

from bench import jobside
from django_wurk import BatchCallback, BatchStatus, job, wurk


@job(wire_name="NoopJob")
def noop(*args: object) -> None:
    """Does nothing: the benchmark measures the system around the job."""
    jobside.begin()
    jobside.end()


@job(wire_name="CpuJob")
def cpu(*args: object) -> None:
    jobside.begin()
    jobside.cpu()
    jobside.end()


@job(wire_name="IoJob")
def io(*args: object) -> None:
    jobside.begin()
    jobside.io()
    jobside.end()


@job(wire_name="LatJob")
def lat(enqueued_at: float) -> None:
    jobside.begin()
    jobside.record_latency(enqueued_at)
    jobside.end()


class BenchBatchDone(BatchCallback):
    """The batch benchmark's success callback: says when it ran (the drain is timed without it)."""

    def on_success(self, status: BatchStatus, options: dict[str, object]) -> None:
        wurk.redis.set("bench:batch-success", status.bid)
