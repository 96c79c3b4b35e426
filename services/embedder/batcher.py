"""Dynamic micro-batching in front of the model's worker threads.

Callers `await batcher.embed(texts)`. The batcher cuts and merges what is waiting into model
batches of at most `max_batch` texts and `token_budget` tokens (the batch's rows times its longest
row: what its padded pass runs) and runs them in `workers` worker threads, one batch each at a
time: the asyncio loop stays free, and torch never has more callers than the cores it was given.

A request is first prepared (`prepare`: the model's tokenizer, in a thread of the lane's own, one
request after another) into what `encode` takes and each text's length in tokens: the workers
only run passes, and the next request is tokenized while the current one's batches run.

- Small requests (one batch or less: queries) are merged: whatever arrived while the model was
  busy goes into the next batch. When the last batch merged several callers (a burst is under
  way), the next batch also waits for as many callers to be waiting, or for a full batch, as
  long as they keep arriving (no gap longer than `wait_s` once the first is back): callers that
  just got their answers come straight back one after another, and one batch of 32 costs far
  less than a batch of 1 followed by one of 31. A caller with no burst just before it is never
  delayed; one that comes as a burst ends waits at most the window.
- Small requests go ahead of large ones, so queries stay fast while a book is being ingested.
- Large requests are cut into batches of similar length (longest first, by the token budget) to
  waste less padding; results come back in input order.
- At most `queue_limit` texts are admitted at once; past that, callers get ResourceExhausted
  instead of the process growing without bound.
- `worker_setup` runs in each worker thread as it starts (its CPU priority and torch threads:
  see threads.py).
- `on_idle`, when given, runs in a worker thread once the batcher has had nothing to do for
  `idle_after_s` after its last batch (the bulk lane gives the memory its batches freed back:
  memory.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar, cast

import numpy as np

from alexandria.errors import ResourceExhausted, Unavailable

log = logging.getLogger(__name__)

# The longest merge window, in gaps of `wait_s` after the batch before it ended: callers coming
# back one after another keep it open, but not for longer than this.
MAX_WINDOW_GAPS = 10


@dataclass(frozen=True)
class EncodedBatch:
    """What an encode function returns for one batch: one row per text, in the order given."""

    vectors: np.ndarray  # (n, dimension) float32
    truncated: np.ndarray  # (n,) bool: the text was cut to the model's maximum length


Item = TypeVar("Item")


@dataclass(frozen=True)
class Prepared(Generic[Item]):
    """What `prepare` makes of a request's texts: what `encode` takes for each text (its tokens), and
    each text's length in tokens (what its row costs in a padded pass)."""

    items: Sequence[Item]
    lengths: np.ndarray  # (n,) int


def by_characters(texts: Sequence[str]) -> Prepared[str]:
    """The texts themselves, their characters standing for tokens: for an encoder that tokenizes its own
    batches."""
    return Prepared(texts, np.fromiter((len(text) for text in texts), dtype=np.int64, count=len(texts)))


@dataclass(frozen=True)
class Embeddings:
    """One request's result: its vectors in input order and how many of its texts were truncated."""

    vectors: np.ndarray
    truncated: int


@dataclass(eq=False)
class _Request(Generic[Item]):
    texts: Sequence[Item]
    lengths: np.ndarray  # of each text, in tokens
    order: np.ndarray  # positions in `texts`, longest text first
    vectors: np.ndarray
    future: asyncio.Future[Embeddings]
    taken: int = 0  # texts handed to a batch so far, in `order`
    finished: int = 0
    truncated: int = 0

    @property
    def untaken(self) -> int:
        return len(self.texts) - self.taken


@dataclass(frozen=True)
class _Slice(Generic[Item]):
    request: _Request[Item]
    start: int  # into request.order
    stop: int

    @property
    def texts(self) -> list[Item]:
        return [self.request.texts[i] for i in self.request.order[self.start : self.stop]]


@dataclass(eq=False)
class _Batch(Generic[Item]):
    slices: list[_Slice[Item]] = field(default_factory=list)

    @property
    def texts(self) -> list[Item]:
        return [text for piece in self.slices for text in piece.texts]


class MicroBatcher(Generic[Item]):
    """Merges and splits concurrent embedding requests into model batches run by worker threads.

    Without `prepare`, `encode` takes the texts themselves and their characters count as tokens."""

    def __init__(
        self,
        encode: Callable[[list[Item]], EncodedBatch],
        *,
        dimension: int,
        max_batch: int,
        wait_s: float,
        queue_limit: int,
        prepare: Callable[[Sequence[str]], Prepared[Item]] | None = None,
        token_budget: int | None = None,
        name: str = "embedder-model",
        workers: int = 1,
        worker_setup: Callable[[], None] | None = None,
        on_idle: Callable[[], object] | None = None,
        idle_after_s: float = 0.0,
    ) -> None:
        self._encode = encode
        self._prepare = prepare
        # One thread: the tokenizer is one object that serves one call at a time (model.py).
        self._preparer = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-tokenizer") if prepare else None
        )
        self._dimension = dimension
        self._max_batch = max_batch
        self._token_budget = token_budget
        self._wait_s = wait_s
        self._queue_limit = queue_limit
        self._small: deque[_Request[Item]] = deque()
        self._large: deque[_Request[Item]] = deque()
        self._admitted = 0  # texts accepted and not yet answered
        self._queued = 0  # texts not yet handed to the model
        self._work_waiting = asyncio.Event()
        self._batch_full = asyncio.Event()
        self._arrived = asyncio.Event()
        self._last_batch_callers = 0
        self._last_batch_done_at = 0.0  # event loop time
        self._running: dict[_Batch[Item], asyncio.Task[None]] = {}
        self._free_workers = asyncio.Semaphore(workers)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name, initializer=worker_setup)
        self._collector: asyncio.Task[None] | None = None
        self._closed = False
        self._on_idle = on_idle
        self._idle_after_s = idle_after_s
        self._idle_timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start collecting batches; call from the event loop that will call `embed`."""
        self._collector = asyncio.get_running_loop().create_task(self._collect(), name="embedder-batcher")

    async def close(self) -> None:
        """Stop: requests not yet answered fail with Unavailable; a batch already running finishes."""
        self._closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        running = [piece.request for batch in self._running for piece in batch.slices]
        unanswered = [*running, *self._small, *self._large]
        # The collector first: a running batch that stops frees a worker it would hand more work to.
        for task in [*([self._collector] if self._collector else []), *self._running.values()]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        shutting_down = Unavailable("The embedder is shutting down; retry, another replica will answer.")
        for request in unanswered:
            if not request.future.done():
                request.future.set_exception(shutting_down)
        self._small.clear()
        self._large.clear()
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        if self._preparer is not None:
            await asyncio.to_thread(self._preparer.shutdown, wait=True)

    async def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts` (any number up to the queue limit); raise ResourceExhausted when full."""
        count = len(texts)
        if count == 0:
            return Embeddings(np.empty((0, self._dimension), np.float32), 0)
        self._admit(count)
        try:
            prepared = await self._prepared(texts)
            if self._closed:
                raise Unavailable("The embedder is shutting down; retry, another replica will answer.")
        except BaseException:  # a failed tokenizer, a caller gone while it ran, a close: the room is free again
            self._admitted -= count
            raise
        request = _Request(
            texts=prepared.items,
            lengths=prepared.lengths,
            order=np.argsort(-prepared.lengths, kind="stable"),
            vectors=np.empty((count, self._dimension), np.float32),
            future=asyncio.get_running_loop().create_future(),
        )
        # Runs on success, failure and cancellation alike (a caller that went away frees its room).
        request.future.add_done_callback(partial(self._release, request))
        (self._small if count <= self._max_batch else self._large).append(request)
        self._queued += count
        self._update_events()
        self._arrived.set()
        return await request.future

    async def _prepared(self, texts: Sequence[str]) -> Prepared[Item]:
        if self._prepare is None or self._preparer is None:
            return cast(Prepared[Item], by_characters(texts))
        return await asyncio.get_running_loop().run_in_executor(self._preparer, self._prepare, texts)

    def _admit(self, count: int) -> None:
        if self._closed:
            raise Unavailable("The embedder is shutting down; retry, another replica will answer.")
        if count > self._queue_limit:
            raise ResourceExhausted(
                f"{count} texts in one request exceed the embedder's queue of {self._queue_limit} texts "
                "(EMBEDDER_QUEUE_LIMIT); send them in smaller requests."
            )
        if self._admitted + count > self._queue_limit:
            raise ResourceExhausted(
                f"The embedder is at capacity: {self._admitted} of {self._queue_limit} texts "
                "(EMBEDDER_QUEUE_LIMIT) are waiting; retry with backoff, or add embedder replicas."
            )
        self._admitted += count

    def _release(self, request: _Request[Item], _future: asyncio.Future[Embeddings]) -> None:
        self._admitted -= len(request.texts)
        self._drop_untaken(request)

    def _drop_untaken(self, request: _Request[Item]) -> None:
        if request.untaken:
            self._queued -= request.untaken
            request.taken = len(request.texts)
            self._update_events()

    def _update_events(self) -> None:
        if self._queued:
            self._work_waiting.set()
        else:
            self._work_waiting.clear()
        if self._queued >= self._max_batch:
            self._batch_full.set()
        else:
            self._batch_full.clear()

    async def _collect(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._work_waiting.wait()
            await self._free_workers.acquire()
            await self._merge_window()
            batch = self._take_batch()
            if not batch.slices:
                self._free_workers.release()
                continue  # everything waiting had been cancelled
            self._last_batch_callers = len(batch.slices)
            self._running[batch] = loop.create_task(self._run(batch), name="embedder-batch")

    async def _run(self, batch: _Batch[Item]) -> None:
        loop = asyncio.get_running_loop()
        texts = batch.texts
        started = time.perf_counter()
        try:
            encoded = await loop.run_in_executor(self._executor, self._encode, texts)
        except Exception as exc:
            log.exception("encoding a batch of %d texts failed", len(texts))
            for piece in batch.slices:
                if not piece.request.future.done():
                    piece.request.future.set_exception(exc)
        else:
            log.debug(
                "batch of %d texts from %d requests in %.1f ms",
                len(texts),
                len(batch.slices),
                (time.perf_counter() - started) * 1000,
            )
            self._deliver(batch, encoded)
        finally:
            # Answered before the worker is free: a merge window opens only once its callers can come back.
            self._last_batch_done_at = loop.time()
            del self._running[batch]
            self._free_workers.release()
            if self._on_idle is not None and self._is_idle():
                if self._idle_timer is not None:
                    self._idle_timer.cancel()
                self._idle_timer = loop.call_later(self._idle_after_s, self._run_on_idle)

    def _is_idle(self) -> bool:
        return not self._running and not self._queued and not self._closed

    def _run_on_idle(self) -> None:
        """`on_idle` in a worker thread, unless work came in since the timer was set (its end sets another)."""
        self._idle_timer = None
        if self._on_idle is not None and self._is_idle():
            asyncio.get_running_loop().run_in_executor(self._executor, self._on_idle)

    async def _merge_window(self) -> None:
        """After a merged batch, wait for as many callers (or a full batch) while they keep coming.

        Its callers were answered just now and each needs a round trip to come back, so the first
        of them is waited for until MAX_WINDOW_GAPS × `wait_s` after that batch ended; from then on
        the window closes when none arrived for `wait_s`, and at that same end at the latest.
        """
        expected = self._last_batch_callers
        if expected < 2 or self._wait_s <= 0:
            return
        loop = asyncio.get_running_loop()
        closes_at = self._last_batch_done_at + self._wait_s * MAX_WINDOW_GAPS
        someone_came_back = False
        while len(self._small) + len(self._large) < expected and not self._batch_full.is_set():
            until_closed = closes_at - loop.time()
            gap = min(self._wait_s, until_closed) if someone_came_back else until_closed
            if gap <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), gap)
            except TimeoutError:
                return  # nobody came for a whole gap: the burst is over
            someone_came_back = True

    def _take_batch(self) -> _Batch[Item]:
        batch: _Batch[Item] = _Batch()
        room = self._max_batch
        rows, longest = 0, 0  # what the batch holds so far, in texts and tokens
        for queue in (self._small, self._large):
            while room and queue:
                request = queue[0]
                if request.future.done():
                    queue.popleft()
                    self._drop_untaken(request)
                    continue
                size = min(room, request.untaken)
                if self._token_budget is not None:
                    # The request's next text is its longest still waiting: the batch's rows are padded
                    # to it or to a longer one already taken.
                    longest = max(longest, int(request.lengths[request.order[request.taken]]))
                    fitting = self._token_budget // max(1, longest) - rows
                    size = min(size, fitting if rows else max(1, fitting))
                    if size <= 0:
                        break
                batch.slices.append(_Slice(request, request.taken, request.taken + size))
                request.taken += size
                self._queued -= size
                room -= size
                rows += size
                if not request.untaken:
                    queue.popleft()
            else:
                continue
            break  # the budget is spent
        self._update_events()
        return batch

    def _deliver(self, batch: _Batch[Item], encoded: EncodedBatch) -> None:
        offset = 0
        for piece in batch.slices:
            request = piece.request
            rows = slice(offset, offset + piece.stop - piece.start)
            offset = rows.stop
            if request.future.done():
                continue  # its caller went away
            request.vectors[request.order[piece.start : piece.stop]] = encoded.vectors[rows]
            request.truncated += int(encoded.truncated[rows].sum())
            request.finished += rows.stop - rows.start
            if request.finished == len(request.texts):
                request.future.set_result(Embeddings(request.vectors, request.truncated))

