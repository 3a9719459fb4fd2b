"""Layer 5, operations: what watches models after they ship (metrics, alerts, drift)."""
