"""Keep the garbage collector's full collections off the request path.

A full collection walks every object the collector tracks: about 270,000 in a server
with torch, polars and one Adult MLP loaded, 70-135 ms with the GIL held on this
project's 2-core reference machine. At 1,000 requests/s one such pause delays a hundred
requests, more than 1% of them: the whole p99. What a server loads at start lives as long
as the server, so `freeze_heap` moves it out of the collector's reach (`gc.freeze`, as
CPython's documentation suggests for long-lived servers); collections then walk only what
requests create.
"""

from __future__ import annotations

import gc


def freeze_heap() -> None:
    """Collect what is garbage now, then freeze every object still alive.

    Unfreezing first gives objects frozen earlier (a version a reload replaced) back to the
    collector, so their reference cycles are still freed: one full collection per call.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
