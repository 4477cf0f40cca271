"""Periodic jobs. Every replica runs this scheduler; the advisory lock picks one runner."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable

from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

from core.config import Settings
from db.session import release_advisory_lock, session_scope, try_advisory_lock

log = logging.getLogger(__name__)


def lock_key(job_name: str) -> int:
    """Stable 32-bit key per job; Python's hash() is salted per process, so crc32 it is."""
    return zlib.crc32(job_name.encode())


def run_exclusive(settings: Settings, job_name: str, body: Callable[[], None]) -> bool:
    with session_scope(settings) as session:
        if not try_advisory_lock(session, lock_key(job_name)):
            log.info("job %s already running elsewhere", job_name)
            return False
        try:
            body()
        finally:
            release_advisory_lock(session, lock_key(job_name))
    return True


def register_jobs(scheduler: BlockingScheduler, settings: Settings, jobs: dict[str, Callable[[], None]]) -> None:
    """Cron expressions are in UTC and come from the [jobs] section of config/app.toml."""
    crons = settings.raw["jobs"]
    schedule = {
        "invoice_cycle": crons["invoice_cycle_cron"],
        "dunning": crons["dunning_cron"],
        "token_cleanup": crons["token_cleanup_cron"],
    }
    for name, cron in schedule.items():
        scheduler.add_job(
            run_exclusive,
            CronTrigger.from_crontab(cron, timezone="UTC"),
            args=(settings, name, jobs[name]),
            id=name,
            max_instances=1,
            coalesce=True,
        )
