"""Periodic jobs (Sidekiq Enterprise's cron): jobs pushed on a schedule by the fleet's leader."""
