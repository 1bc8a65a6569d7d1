"""Development-only: embedded PostgreSQL and Redis, and the process supervisor behind `make run`."""
