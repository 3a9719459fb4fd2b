"""What `benchmarks/peers.py` runs inside the peers' own virtualenvs.

Each module here is started as a script by the peers' interpreter, with forgeml's `src` on
PYTHONPATH, so the peers load the same registered model versions through forgeml's own
code (`forgeml.serve.model.load_model`: FeatureSpec or tokenizer, forward, decoding) and
only the framework around that work differs.
"""
