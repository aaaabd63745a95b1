"""Scheduled jobs: schedules, durable state, the scheduler, isolated runs and delivery.

* :mod:`~fermix_core.jobs.schedules` — interval / once / cron parsing and next-fire times.
* :mod:`~fermix_core.jobs.store` — the :class:`JobStore` contract and its SQLite backend.
* :mod:`~fermix_core.jobs.scheduler` — sleeps until the next due job, claims, caps, recovers.
* :mod:`~fermix_core.jobs.runner` — one isolated, bounded agent loop per run.
* :mod:`~fermix_core.jobs.delivery` — where a run's result goes.
* :mod:`~fermix_core.jobs.service` — what the job tools and ``fermix jobs`` call.

Importing this package is cheap; each module imports what it needs itself.
"""
