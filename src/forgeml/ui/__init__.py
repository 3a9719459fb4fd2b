"""The web UI: server-rendered pages (Jinja2, htmx) over the control-plane API."""
