"""Sign-up, admin authentication, dashboard and management API."""
