"""Sidekiq Pro/Enterprise features (batches, unique jobs, limiters, periodic jobs, ...).

Each feature is one module here that plugs into the engine as client or server
middleware or a worker hook; none of them edits the processor. Engine code only.
"""
