"""Agents: typed tools, the function-calling loop, budgets, approval, tracing."""
