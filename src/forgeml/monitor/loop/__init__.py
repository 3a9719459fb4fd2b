"""The closed loop: a monitoring policy per deployment says which alert starts which
retraining, the gate the challenger must pass, and the canary that promotes it or rolls
it back (`apply_policy`); `loop_timeline` reads back what happened, step by step.

A policy compiles into an ordinary pipeline (the policy's own preparation steps, then
retrain -> gate -> canary) and an alert trigger that runs it, so every stage is a
scheduler job, recorded, cached where it may be, and idempotent across server restarts.
"""

from forgeml.monitor.loop._apply import (
    apply_policy,
    list_policies,
    policy_summary,
    remove_policy,
)
from forgeml.monitor.loop._policy import Policy, compile_policy, load_policy
from forgeml.monitor.loop._timeline import TimelineEvent, loop_timeline

__all__ = [
    "Policy",
    "TimelineEvent",
    "apply_policy",
    "compile_policy",
    "list_policies",
    "load_policy",
    "loop_timeline",
    "policy_summary",
    "remove_policy",
]
