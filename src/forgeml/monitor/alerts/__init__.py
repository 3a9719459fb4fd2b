"""Alerts evaluated by `forgeml server` itself, with no Prometheus needed.

The shipped rule file (and a user's, same format) is compiled by `load_rules` into a PromQL
subset (`_promql`) evaluated over a bounded store of recent samples (`_samples`) that
`_collect` fills from in-process registries and replica scrapes. `_state` keeps Prometheus'
alert state machine in the store (each alert in the project of the subject its labels name,
`_subjects`), `_channels` sends notifications (log, webhook with
Alertmanager's v4 payload, e-mail), `_receiver` records alerts a real Alertmanager sends,
and `fired_since` is the cursor the pipeline triggers follow.
"""

from forgeml.monitor.alerts._channels import (
    AlertConfig,
    Channel,
    build_channels,
    deliver,
    load_config,
)
from forgeml.monitor.alerts._evaluator import AlertEvaluator, serve_alerts
from forgeml.monitor.alerts._payload import WebhookAlert, WebhookMessage
from forgeml.monitor.alerts._promql import PromQLError, compile_expr
from forgeml.monitor.alerts._query import evaluate
from forgeml.monitor.alerts._receiver import Received, parse_message, receive
from forgeml.monitor.alerts._records import (
    ack_alert,
    alert_summary,
    find_alert,
    fired_since,
    get_alert,
    list_alerts,
)
from forgeml.monitor.alerts._rules import AlertRule, load_rules, parse_rules
from forgeml.monitor.alerts._samples import SampleStore, labels_of
from forgeml.monitor.alerts._state import STATES, Transition

__all__ = [
    "STATES",
    "AlertConfig",
    "AlertEvaluator",
    "AlertRule",
    "Channel",
    "PromQLError",
    "Received",
    "SampleStore",
    "Transition",
    "WebhookAlert",
    "WebhookMessage",
    "ack_alert",
    "alert_summary",
    "build_channels",
    "compile_expr",
    "deliver",
    "evaluate",
    "find_alert",
    "fired_since",
    "get_alert",
    "labels_of",
    "list_alerts",
    "load_config",
    "load_rules",
    "parse_message",
    "parse_rules",
    "receive",
    "serve_alerts",
]
