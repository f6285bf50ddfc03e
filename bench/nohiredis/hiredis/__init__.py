"""Hides the real hiredis: bench/run.py puts bench/nohiredis/ first on PYTHONPATH for the
``*-nohiredis`` systems, so redis-py's ``import hiredis`` fails and it falls back to its
Python reply parser, as without ``redis[hiredis]``. bench/settings.py checks that it did."""

raise ImportError("hiredis is hidden by bench/nohiredis/ (a no-hiredis benchmark system)")
