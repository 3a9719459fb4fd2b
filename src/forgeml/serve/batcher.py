"""Dynamic batching: requests that arrive close together run as one forward pass.

The first request of a batch waits up to `max_wait_ms` for others; the batch closes
early when it holds `max_batch_size` rows (a single request larger than that runs on its
own). With `max_wait_ms` 0 a batch holds whatever queued while the previous one ran, so
a lone request never waits and a saturated server still batches (as Triton's dynamic
batcher does with a zero queue delay). Inference runs in one worker thread per batcher,
never on the event loop; results return to the loop with `call_soon_threadsafe`.

The batch limit is sized for the device unless set (`max_batch_for`): a GPU's forward pass
takes about as long for one row as for as many as fill its multiprocessors, so it batches
more than a CPU, whose time grows with the rows; memory bounds the activations one batch
may hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from forgeml.core.errors import ForgemlError, ServiceUnavailableError

CPU_MAX_BATCH = 32  # what a server on the CPU has always batched
_GIB = 2**30


@dataclass
class BatchItem:
    """One request in the queue: its payload, its row count and where its answer goes."""

    payload: Any
    size: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    queued_at: float = field(default_factory=time.perf_counter)


def max_batch_for(device: str, gpu_memory_bytes: int | None) -> int:
    """The dynamic batcher's row limit for a device (a pure function).

    Args:
        device: "cuda" or "cpu".
        gpu_memory_bytes: the GPU's total memory; None where unknown (treated as a CPU).

    Returns:
        32 on the CPU (as before); on a GPU 64 below 16 GiB, 128 below 40 GiB, else 256.
    """
    if device != "cuda" or not gpu_memory_bytes:
        return CPU_MAX_BATCH
    if gpu_memory_bytes < 16 * _GIB:
        return 64
    return 128 if gpu_memory_bytes < 40 * _GIB else 256


def serving_batch_size(requested: int | None, device: str) -> int:
    """`requested`, or the limit `max_batch_for` this machine's GPU 0 (NVML), when `device`
    (auto, cuda or cpu) may use it."""
    if requested is not None:
        return requested
    if device == "cpu":
        return CPU_MAX_BATCH
    from forgeml.core.nvml import gpu_memory_bytes

    memory = gpu_memory_bytes(0)
    return max_batch_for("cuda" if memory else "cpu", memory)


# run_batch(payloads) -> one result per payload, or raises for the whole batch
BatchFunction = Callable[[list[Any]], list[Any]]
BatchObserver = Callable[[int, float], None]  # (rows, seconds) of each batch run
_STOP = object()


class Batcher:
    """A queue plus a worker thread that runs `run_batch` over batches of queued payloads."""

    def __init__(
        self,
        run_batch: BatchFunction,
        max_batch_size: int,
        max_wait_ms: float,
        name: str = "model",
        observe: BatchObserver | None = None,
    ) -> None:
        self._run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self._observe = observe
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # C, no Python-level locks
        self._carry: BatchItem | None = None  # did not fit the last batch; opens the next
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    @property
    def depth(self) -> int:
        """Requests queued and not yet taken into a batch."""
        return self._queue.qsize() + (1 if self._carry is not None else 0)

    async def submit(self, payload: Any, size: int = 1) -> Any:
        """Queue `payload` (`size` rows) and wait for its result.

        Raises:
            ServiceUnavailableError: the batcher was closed (the server is stopping).
            Exception: whatever `run_batch` raised for this payload.
        """
        loop = asyncio.get_running_loop()
        item = BatchItem(payload, max(1, size), loop, loop.create_future())
        with self._lock:  # so no item lands behind the stop marker
            if self._closed:
                raise ServiceUnavailableError("The model server is shutting down; retry.")
            self._queue.put(item)
        return await item.future

    def close(self, timeout: float = 10.0) -> None:
        """Stop taking requests, finish the queued ones, and join the worker thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join(timeout)

    def _work(self) -> None:
        while True:
            batch, stop = self._collect()
            if batch:
                self._execute(batch)
            if stop:
                return

    def _collect(self) -> tuple[list[BatchItem], bool]:
        """The next batch, and whether the stop marker was reached."""
        first = self._carry if self._carry is not None else self._queue.get()
        self._carry = None
        if first is _STOP:
            return [], True
        batch, rows = [first], first.size
        deadline = time.perf_counter() + self.max_wait_s
        while rows < self.max_batch_size:
            remaining = deadline - time.perf_counter()
            try:
                item = (
                    self._queue.get(timeout=remaining)
                    if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            if rows + item.size > self.max_batch_size:
                self._carry = item
                break
            batch.append(item)
            rows += item.size
        return batch, False

    def _execute(self, batch: list[BatchItem]) -> None:
        started = time.perf_counter()
        try:
            results: Sequence[Any] = self._run_batch([item.payload for item in batch])
        except ForgemlError as error:
            if len(batch) == 1:
                _settle(batch[0], error=error)
                return
            # one bad request must not fail its neighbours: rerun each on its own
            for item in batch:
                self._execute([item])
            return
        except Exception as error:  # a bug; every caller gets it (the app answers 500)
            for item in batch:
                _settle(item, error=error)
            return
        if self._observe is not None:
            self._observe(sum(item.size for item in batch), time.perf_counter() - started)
        for item, result in zip(batch, results, strict=True):
            _settle(item, result=result)


def _settle(item: BatchItem, result: Any = None, error: BaseException | None = None) -> None:
    def deliver() -> None:
        if item.future.done():  # the caller went away (client disconnected)
            return
        if error is not None:
            item.future.set_exception(error)
        else:
            item.future.set_result(result)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        item.loop.call_soon_threadsafe(deliver)
