"""Accounts, roles, tokens and sign-in: who may do what on the control plane."""
