"""Governance (layer 5): lineage, model cards, fairness mitigation and explanations, read
from the records every other layer keeps."""
