"""The micro-batcher with a fake encode function: merging, ordering, priority, queue limit, failures."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence

import numpy as np
import pytest

from alexandria.errors import ResourceExhausted, Unavailable
from services.embedder.batcher import EncodedBatch, MicroBatcher, Prepared

pytestmark = pytest.mark.timeout(20)

DIMENSION = 2


class FakeModel:
    """Encodes a text as (its length, its number); records every batch and the thread it ran in.

    With `gated`, each batch waits for `release()`, so a test decides what is queued while the
    model is busy. Texts containing "LONG" count as truncated; a text "FAIL" makes the batch raise.
    """

    def __init__(self, gated: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[int] = set()
        self.started = threading.Semaphore(0)
        self._gate = threading.Semaphore(0)
        self._gated = gated

    def encode(self, texts: list[str]) -> EncodedBatch:
        self.batches.append(texts)
        self.threads.add(threading.get_ident())
        self.started.release()
        if self._gated:
            self._gate.acquire()
        if "FAIL" in texts:
            raise RuntimeError("the model broke")
        vectors = np.array([[len(text), _number(text)] for text in texts], dtype=np.float32)
        return EncodedBatch(
            vectors=vectors, truncated=np.array(["LONG" in text for text in texts], dtype=bool)
        )

    def release(self, batches: int = 1) -> None:
        for _ in range(batches):
            self._gate.release()

    async def wait_until_busy(self) -> None:
        """Until a batch has entered the model (event-driven: a semaphore the worker releases)."""
        await asyncio.to_thread(self.started.acquire)


async def _queued() -> None:
    """Let the tasks just created queue their texts: `embed` admits and queues them before its first await,
    so one turn of the event loop (no timed sleep) runs each of them that far."""
    await asyncio.sleep(0)


def _number(text: str) -> float:
    digits = "".join(c for c in text if c.isdigit())
    return float(digits) if digits else -1.0


async def _batcher(
    model: FakeModel,
    max_batch: int = 4,
    wait_s: float = 0.0,
    queue_limit: int = 100,
    workers: int = 1,
    worker_setup: Callable[[], None] | None = None,
) -> MicroBatcher:
    batcher = MicroBatcher(
        model.encode,
        dimension=DIMENSION,
        max_batch=max_batch,
        wait_s=wait_s,
        queue_limit=queue_limit,
        workers=workers,
        worker_setup=worker_setup,
    )
    batcher.start()
    return batcher


@pytest.fixture
async def closing() -> AsyncIterator[list[MicroBatcher]]:
    batchers: list[MicroBatcher] = []
    yield batchers
    for batcher in batchers:
        await batcher.close()


@pytest.mark.asyncio
async def test_requests_arriving_while_the_model_is_busy_share_the_next_batch(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel(gated=True)
    batcher = await _batcher(model, max_batch=8)
    closing.append(batcher)
    first = asyncio.create_task(batcher.embed(["q0"]))
    await model.wait_until_busy()
    queries = [asyncio.create_task(batcher.embed([f"q{i}"])) for i in range(1, 6)]
    await _queued()
    model.release(2)
    results = await asyncio.gather(first, *queries)
    assert model.batches == [["q0"], ["q1", "q2", "q3", "q4", "q5"]]
    for i, result in enumerate(results):
        assert result.vectors.tolist() == [[2.0, float(i)]]


@pytest.mark.asyncio
async def test_a_lone_request_is_not_held_back_by_the_merge_window(closing: list[MicroBatcher]) -> None:
    batcher = await _batcher(FakeModel(), wait_s=3600)
    closing.append(batcher)
    result = await batcher.embed(["alone"])  # the test's timeout fails it if it waited the window
    assert result.vectors.shape == (1, DIMENSION)


@pytest.mark.asyncio
async def test_during_a_burst_the_merge_window_closes_as_soon_as_a_batch_is_full(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel()
    batcher = await _batcher(model, max_batch=3, wait_s=3600)
    closing.append(batcher)
    await asyncio.gather(batcher.embed(["a1"]), batcher.embed(["b2"]))  # two callers: a burst
    await asyncio.gather(*(batcher.embed([f"c{i}"]) for i in range(3)))
    assert model.batches[-1] == ["c0", "c1", "c2"]


@pytest.mark.asyncio
async def test_after_a_merged_batch_the_next_waits_for_as_many_callers(closing: list[MicroBatcher]) -> None:
    model = FakeModel()
    batcher = await _batcher(model, max_batch=8, wait_s=3600)
    closing.append(batcher)
    await asyncio.gather(*(batcher.embed([f"a{i}"]) for i in range(3)))  # three callers in one batch
    returning = []
    for i in range(3):  # they come back one by one, each while the batcher could already start
        returning.append(asyncio.create_task(batcher.embed([f"b{i}"])))
        await _queued()
    await asyncio.gather(*returning)
    assert model.batches == [["a0", "a1", "a2"], ["b0", "b1", "b2"]]


@pytest.mark.asyncio
async def test_the_first_caller_back_after_a_merged_batch_may_take_longer_than_one_gap(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel()
    gap = 0.2  # the window: MAX_WINDOW_GAPS gaps (2 s) after the merged batch ended
    batcher = await _batcher(model, max_batch=8, wait_s=gap)
    closing.append(batcher)
    await asyncio.gather(*(batcher.embed([f"a{i}"]) for i in range(3)))
    straggler = asyncio.create_task(batcher.embed(["b0"]))
    await asyncio.sleep(2.5 * gap)  # longer than a gap, well inside the window
    await asyncio.gather(straggler, batcher.embed(["b1"]), batcher.embed(["b2"]))
    assert model.batches == [["a0", "a1", "a2"], ["b0", "b1", "b2"]]


@pytest.mark.asyncio
async def test_large_requests_are_split_by_length_and_come_back_in_input_order(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel()
    batcher = await _batcher(model, max_batch=4)
    closing.append(batcher)
    rng = np.random.default_rng(7)
    texts = [f"{i}" + "x" * int(rng.integers(0, 60)) for i in range(23)]
    result = await batcher.embed(texts)
    assert result.vectors.tolist() == [[len(text), i] for i, text in enumerate(texts)]
    assert [len(batch) for batch in model.batches] == [4, 4, 4, 4, 4, 3]
    lengths = [len(text) for batch in model.batches for text in batch]
    assert lengths == sorted(lengths, reverse=True)


@pytest.mark.asyncio
async def test_truncated_texts_are_counted_per_request(closing: list[MicroBatcher]) -> None:
    batcher = await _batcher(FakeModel(), max_batch=2)
    closing.append(batcher)
    mixed, clean = await asyncio.gather(batcher.embed(["LONG 1", "2", "LONG 3"]), batcher.embed(["4"]))
    assert (mixed.truncated, clean.truncated) == (2, 0)


@pytest.mark.asyncio
async def test_small_requests_go_ahead_of_a_large_one(closing: list[MicroBatcher]) -> None:
    model = FakeModel(gated=True)
    batcher = await _batcher(model, max_batch=2)
    closing.append(batcher)
    bulk = asyncio.create_task(batcher.embed([f"bulk{i}" for i in range(6)]))
    await model.wait_until_busy()
    query = asyncio.create_task(batcher.embed(["query"]))
    model.release(4)
    await asyncio.gather(bulk, query)
    assert "query" in model.batches[1]


@pytest.mark.asyncio
async def test_a_full_queue_refuses_with_resource_exhausted_and_recovers(closing: list[MicroBatcher]) -> None:
    model = FakeModel(gated=True)
    batcher = await _batcher(model, max_batch=8, queue_limit=8)
    closing.append(batcher)
    with pytest.raises(ResourceExhausted, match="EMBEDDER_QUEUE_LIMIT"):
        await batcher.embed(["t"] * 9)
    busy = asyncio.create_task(batcher.embed([f"t{i}" for i in range(6)]))
    await model.wait_until_busy()
    with pytest.raises(ResourceExhausted, match="6 of 8"):
        await batcher.embed(["one", "two", "three"])
    fits = asyncio.create_task(batcher.embed(["one", "two"]))
    model.release(3)
    await asyncio.gather(busy, fits)
    full_again = await batcher.embed([f"t{i}" for i in range(8)])  # answered texts leave the queue
    assert full_again.vectors.shape == (8, DIMENSION)


@pytest.mark.asyncio
async def test_a_cancelled_request_frees_its_room_and_never_reaches_the_model(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel(gated=True)
    batcher = await _batcher(model, queue_limit=3)
    closing.append(batcher)
    running = asyncio.create_task(batcher.embed(["r1"]))
    await model.wait_until_busy()
    abandoned = asyncio.create_task(batcher.embed(["gone1", "gone2"]))
    await _queued()
    with pytest.raises(ResourceExhausted, match="3 of 3"):
        await batcher.embed(["more"])
    abandoned.cancel()
    with pytest.raises(asyncio.CancelledError):
        await abandoned
    after = asyncio.create_task(batcher.embed(["after1", "after2"]))  # fits in the room the cancelled one left
    model.release(2)
    await running
    assert (await after).vectors.shape == (2, DIMENSION)
    assert model.batches == [["r1"], ["after1", "after2"]]


@pytest.mark.asyncio
async def test_a_failing_batch_fails_its_callers_and_the_batcher_goes_on(closing: list[MicroBatcher]) -> None:
    model = FakeModel()
    batcher = await _batcher(model, queue_limit=1)
    closing.append(batcher)
    with pytest.raises(RuntimeError, match="the model broke"):
        await batcher.embed(["FAIL"])
    assert (await batcher.embed(["fine"])).truncated == 0  # the failed text left the queue of one


@pytest.mark.asyncio
async def test_the_model_runs_in_one_worker_thread_off_the_event_loop(closing: list[MicroBatcher]) -> None:
    model = FakeModel()
    batcher = await _batcher(model, max_batch=2)
    closing.append(batcher)
    await asyncio.gather(*(batcher.embed([f"t{i}"] * 3) for i in range(5)))
    assert len(model.threads) == 1
    assert threading.get_ident() not in model.threads


@pytest.mark.asyncio
async def test_two_workers_run_two_batches_at_once_in_two_threads(closing: list[MicroBatcher]) -> None:
    model = FakeModel(gated=True)
    batcher = await _batcher(model, max_batch=2, workers=2)
    closing.append(batcher)
    request = asyncio.create_task(batcher.embed([f"t{i}" for i in range(4)]))
    await model.wait_until_busy()
    await model.wait_until_busy()  # the second batch entered the model before the first was released
    model.release(2)
    result = await request
    assert [len(batch) for batch in model.batches] == [2, 2]
    assert len(model.threads) == 2
    assert result.vectors[:, 1].tolist() == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_every_worker_thread_runs_the_setup_before_its_first_batch(closing: list[MicroBatcher]) -> None:
    model = FakeModel(gated=True)
    set_up: set[int] = set()
    batcher = await _batcher(model, max_batch=1, workers=2, worker_setup=lambda: set_up.add(threading.get_ident()))
    closing.append(batcher)
    request = asyncio.create_task(batcher.embed(["a1", "b2"]))
    await model.wait_until_busy()
    await model.wait_until_busy()
    model.release(2)
    await request
    assert len(model.threads) == 2
    assert model.threads == set_up


@pytest.mark.asyncio
async def test_empty_input_gives_an_empty_matrix(closing: list[MicroBatcher]) -> None:
    model = FakeModel()
    batcher = await _batcher(model)
    closing.append(batcher)
    result = await batcher.embed([])
    assert result.vectors.shape == (0, DIMENSION)
    assert model.batches == []


@pytest.mark.asyncio
async def test_closing_fails_what_is_still_waiting_with_unavailable() -> None:
    model = FakeModel(gated=True)
    batcher = await _batcher(model)
    running = asyncio.create_task(batcher.embed(["r1"]))
    await model.wait_until_busy()
    waiting = asyncio.create_task(batcher.embed(["w1"]))
    await _queued()
    model.release()
    await batcher.close()
    for task in (running, waiting):
        with pytest.raises(Unavailable, match="shutting down"):
            await task
    with pytest.raises(Unavailable):
        await batcher.embed(["late"])


@pytest.mark.asyncio
async def test_on_idle_runs_in_a_worker_once_the_batcher_has_drained(closing: list[MicroBatcher]) -> None:
    model = FakeModel(gated=True)
    idle = threading.Event()
    idle_threads: list[int] = []

    def on_idle() -> None:
        idle_threads.append(threading.get_ident())
        idle.set()

    batcher = MicroBatcher(model.encode, dimension=DIMENSION, max_batch=2, wait_s=0.0, queue_limit=100,
                           on_idle=on_idle, idle_after_s=0.0)
    batcher.start()
    closing.append(batcher)
    texts = asyncio.create_task(batcher.embed(["a1", "b2", "c3"]))  # two batches
    await model.wait_until_busy()
    model.release()
    await model.wait_until_busy()  # the second batch runs: the first one's end found work waiting
    assert not idle.is_set()
    model.release()
    await texts
    assert await asyncio.to_thread(idle.wait, 5)
    assert len(idle_threads) == 1 and idle_threads[0] in model.threads


def _words(texts: Sequence[str]) -> Prepared[str]:
    """A tokenizer for the tests: a text's words are its tokens; records the thread it ran in."""
    _words.threads.add(threading.get_ident())  # type: ignore[attr-defined]
    if "UNTOKENIZABLE" in texts:
        raise ValueError("the tokenizer broke")
    return Prepared(texts, np.array([len(text.split()) for text in texts], dtype=np.int64))


_words.threads = set()  # type: ignore[attr-defined]


@pytest.mark.asyncio
async def test_batches_are_cut_by_the_token_budget_longest_first_and_answered_in_input_order(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel()
    batcher = MicroBatcher(model.encode, dimension=DIMENSION, max_batch=8, wait_s=0.0, queue_limit=100,
                           prepare=_words, token_budget=12)
    batcher.start()
    closing.append(batcher)
    rng = np.random.default_rng(3)
    texts = [" ".join([f"{i}"] + ["w"] * int(rng.integers(0, 9))) for i in range(30)]
    result = await batcher.embed(texts)
    assert result.vectors.tolist() == [[len(text), i] for i, text in enumerate(texts)]
    words = [[len(text.split()) for text in batch] for batch in model.batches]
    assert all(len(batch) * max(batch) <= 12 or len(batch) == 1 for batch in words)
    assert all(len(batch) <= 8 for batch in words)
    flat = [count for batch in words for count in batch]
    assert flat == sorted(flat, reverse=True)
    # The budget is spent, not left idle: a batch ends only where the next text would not fit.
    for batch in words[:-1]:
        assert (len(batch) + 1) * max(batch) > 12 or len(batch) == 8, words


@pytest.mark.asyncio
async def test_texts_are_tokenized_in_a_thread_of_their_own_and_a_failing_tokenizer_frees_the_room(
    closing: list[MicroBatcher],
) -> None:
    model = FakeModel()
    batcher = MicroBatcher(model.encode, dimension=DIMENSION, max_batch=4, wait_s=0.0, queue_limit=10,
                           prepare=_words, token_budget=100)
    batcher.start()
    closing.append(batcher)
    _words.threads.clear()  # type: ignore[attr-defined]
    await batcher.embed(["one two", "three"])
    assert _words.threads.isdisjoint(model.threads | {threading.get_ident()})  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="tokenizer broke"):
        await batcher.embed(["fine", "UNTOKENIZABLE"])
    assert (await batcher.embed(["a"] * 10)).vectors.shape == (10, DIMENSION)
