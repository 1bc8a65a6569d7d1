"""The warning every service logs at each start when it is not in production.

``FRONTDOOR_ENV`` defaults to ``dev`` so that ``make run`` and a bare checkout work, which
means a service started without it (outside ``make run``) accepts plain ``http://``
loopback URLs, sets cookies without ``Secure`` and sends no HSTS. It must not do that
quietly: each process says so in its log, at WARNING, every time it starts.
"""

from __future__ import annotations

from collections.abc import Mapping

from .logging import get_logger
from .settings import ENV_NAMES, Settings

__all__ = ["warn_if_dev_mode"]


def warn_if_dev_mode(settings: Settings, service: str, environ: Mapping[str, str]) -> bool:
    """Log the ``dev_mode`` WARNING unless ``settings`` is production.

    Args:
        settings: The settings the process started with.
        service: The process's name (``console``, ``issuer``, ``ledger``, ``worker``...).
        environ: The environment the settings came from: an unset ``FRONTDOOR_ENV`` is named.

    Returns:
        Whether the warning was logged.
    """
    if not settings.is_dev:
        return False
    var = ENV_NAMES["env"]
    explicit = var in environ
    cause = f"{var}={settings.env}" if explicit else f"{var} is not set, so it defaults to dev"
    get_logger("frontdoor.dev_mode").warning(
        "dev_mode",
        service=service,
        env=settings.env,
        env_set=explicit,
        detail=f"{cause}: plain http:// loopback URLs are accepted, cookies are not Secure and there is no "
        f"HSTS. Never expose this process; set {var}=production outside development.",
    )
    return True
