"""SmolLM2 served by forgeml inside a benchmark's process: one helper for every LM benchmark.

`cached_model_home()` is benchmarks/out/llm/home with `smollm2@v1`, imported from the GGUF
the first time (the home `benchmarks/llm.py --quick` keeps). `serving(home, concurrency)`
runs `create_app` over `home`'s `smollm2` under uvicorn in a thread, waits until it
answers, and yields its URL; leaving the block stops it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MODEL = "smollm2"


@contextmanager
def serving(home: Path, concurrency: int) -> Iterator[str]:
    """forgeml's server for `home`'s smollm2 (batches of `concurrency`); yields its URL.

    Raises:
        SystemExit: the server stopped before it was ready (a taken port, a load error).
    """
    import uvicorn

    from forgeml.core.config import Settings
    from forgeml.core.processes import free_port
    from forgeml.core.workspace import Workspace
    from forgeml.serve import ServeOptions, create_app
    from forgeml.serve._supervisor import probe

    workspace = Workspace(Settings(home=home, user="bench"))
    app = create_app(workspace, [MODEL], ServeOptions(max_batch_size=concurrency))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        while not probe(url, timeout=5):
            if not thread.is_alive():  # it failed to start: no wait
                raise SystemExit("The benchmark's server stopped before it was ready; see above.")
            time.sleep(0.1)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
        workspace.close()


def cached_model_home() -> Path:
    """benchmarks/out/llm/home with smollm2@v1, imported from the GGUF the first time."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from llm import CACHED_HOME, _import

    workspace = Workspace(Settings(home=CACHED_HOME, user="bench"))
    try:
        _import(workspace, CACHED_HOME, reuse=True)
    finally:
        workspace.close()
    return CACHED_HOME
