"""Celery worker and beat: DNS re-verification and other periodic jobs."""
