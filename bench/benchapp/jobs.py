from django_wurk import job


@job(wire_name="NoopJob")
def noop(*args: object) -> None:
    """Does nothing: the benchmark measures the system around the job."""
