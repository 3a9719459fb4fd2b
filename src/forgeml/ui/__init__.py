"""The web UI: server-rendered pages (Jinja2 with autoescape, htmx, uPlot, ECharts) over the
control-plane API's app, its sessions and its roles. `forgeml server --api-port` serves it
at `/`."""

from forgeml.ui.app import create_app

__all__ = ["create_app"]
