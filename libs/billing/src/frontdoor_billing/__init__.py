"""Plans and billing: plans as configuration, metering from the durable tables, Stripe.

Layer: above every domain library. It reads (by SQL, never by import) the rows the
sessions, operations and webhooks libraries write, and writes company webhook events
through the webhooks library; nothing below imports it, the services call it at the
edges where a limit bites.
"""

from .accounts import BillingAccount, ensure_account, get_account
from .config import BillingConfig
from .gateway import GatewayError, Invoice, SignatureError, StripeGateway, verify_event
from .limits import LimitReached, SessionsSuspended, require_room_for, tenant_standing
from .metering import count_closed_days, meter_identifier, report_usage
from .plans import LIMITS, METRIC_LABELS, METRICS, Limit, Metric, Plan, PlanCatalogue, load_plans
from .session_admission import SessionAdmission
from .standing import Banner, Standing, standing_of
from .stripe_events import HANDLED_TYPES, apply_stripe_event, transition
from .usage import count, month_start, month_usage, resource_counts

__all__ = [
    "HANDLED_TYPES",
    "LIMITS",
    "METRICS",
    "METRIC_LABELS",
    "Banner",
    "BillingAccount",
    "BillingConfig",
    "GatewayError",
    "Invoice",
    "Limit",
    "LimitReached",
    "Metric",
    "Plan",
    "PlanCatalogue",
    "SessionAdmission",
    "SessionsSuspended",
    "SignatureError",
    "Standing",
    "StripeGateway",
    "apply_stripe_event",
    "count",
    "count_closed_days",
    "ensure_account",
    "get_account",
    "load_plans",
    "meter_identifier",
    "month_start",
    "month_usage",
    "report_usage",
    "require_room_for",
    "resource_counts",
    "standing_of",
    "tenant_standing",
    "transition",
    "verify_event",
]
