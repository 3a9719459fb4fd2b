"""Layer 5, operations: watching models after they ship.

`forgeml.monitor.drift` compares live or newer data with a model's reference profile;
`forgeml.monitor.assets` holds the Prometheus alert rules and Grafana dashboard forgeml ships;
`forgeml.monitor.alerts` evaluates those rules inside `forgeml server` (no Prometheus
needed), records and sends the alerts, and receives a real Alertmanager's.
"""
