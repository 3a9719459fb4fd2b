"""The control plane's host and origin guard, shared with the model server and the gateway
(`forgeml.serve.hosts`)."""

from forgeml.serve.hosts import LOOPBACK_NAMES, NOSNIFF, HostGuard, ServedHosts, host_name

__all__ = ["LOOPBACK_NAMES", "NOSNIFF", "HostGuard", "ServedHosts", "host_name"]
