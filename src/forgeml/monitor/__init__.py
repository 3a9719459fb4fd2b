"""Layer 5, operations: watching models after they ship.

`forgeml.monitor.drift` compares live or newer data with a model's reference profile.
"""
