"""The serve template (adult-mlp@v1..., sst2-minilm@v1) for the governance tests."""

from tests.serve.conftest import serve_template

__all__ = ["serve_template"]
