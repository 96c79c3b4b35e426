"""Retrieval quality of alexandria_query per search mode: recall@5 and MRR@10 over the shared corpus.

    .venv/bin/python bench/retrieval.py [--corpus ../shared/corpus] [--scratch bench/out/retrieval]

1. The books of bench/retrieval_questions.yaml are ingested into a scratch embedded store, once:
   the store is kept between runs and only missing books are ingested (`ingest_corpus`: the ingest
   pipeline, `services.ingest.pipeline.BookIngestor`, with its default chunking).
2. Every question is asked through the query domain (`services.query.search.Searcher`, no gRPC in
   front of it; the query vector comes from an in-process embedder server) in each search mode,
   at threshold 0 so that ranking alone is measured, and again at the default threshold to count
   the questions left with no answer at all.

A question is answered at rank r when the r-th result comes from its book and contains its phrase
(case and spacing aside). Semantic (dense only) is the baseline the other modes are compared to.
The last line is JSON: {"semantic": {"recall@5", "mrr@10", "answered@0.5"}, "lexical": ..., "hybrid": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from alexandria.clients import EmbedderClient
from alexandria.logs import configure_logging
from alexandria.settings import ClientSettings, EmbedderSettings, StoreSettings
from alexandria.store import Filter, Store, open_store
from alexandria.store import schema as f
from services.embedder import server as embedder_server
from services.ingest.documents import ChunkingParams
from services.ingest.extract import extract_book
from services.ingest.pipeline import BookFile, BookIngestor, content_key
from services.query.search import DEFAULT_THRESHOLD, Passage, Searcher, SearchMode, SearchQuery
from services.query.server import EmbedderQueryEncoder

QUESTIONS_FILE = Path(__file__).resolve().parent / "retrieval_questions.yaml"
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
DEFAULT_SCRATCH = ROOT / "bench" / "out" / "retrieval"
COLLECTION = "retrieval_bench"
RECALL_AT = 5
MRR_AT = 10
# Calibre keeps one folder per book, "<Title> (<id>)"; this is the format ingest prefers.
FORMAT_PREFERENCE = (".epub", ".pdf")
MODES = (SearchMode.SEMANTIC, SearchMode.LEXICAL, SearchMode.HYBRID)
UNLIMITED_BUDGET = 10**9

log = logging.getLogger("bench.retrieval")


@dataclass(frozen=True)
class Question:
    book: int | str  # Calibre id, or a file name under corpus/local-files
    kind: str        # "name" or "paraphrase"
    question: str
    phrase: str


def load_questions(path: Path = QUESTIONS_FILE) -> list[Question]:
    return [Question(**entry) for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["questions"]]


def normalise(text: str) -> str:
    """Case and spacing aside: what 'the phrase appears in the text' compares."""
    return " ".join(text.casefold().split())


def contains_phrase(text: str, phrase: str) -> bool:
    return normalise(phrase) in normalise(text)


def book_file(corpus: Path, book: int | str) -> Path:
    """The file a question's book is read from: Calibre's EPUB (else PDF), or a loose local file."""
    if isinstance(book, str):
        return corpus / "local-files" / book
    for folder in sorted((corpus / "calibre-library").glob(f"*/* ({book})")):
        for suffix in FORMAT_PREFERENCE:
            found = sorted(folder.glob(f"*{suffix}"))
            if found:
                return found[0]
    raise FileNotFoundError(f"no EPUB or PDF of Calibre book {book} under {corpus / 'calibre-library'}")


def is_from_book(passage: Passage, book: int | str) -> bool:
    """Whether a result comes from the question's book, however it was ingested (Calibre id or path)."""
    path = Path(passage.file_path)
    if isinstance(book, str):
        return path.name == book
    return passage.calibre_id == book or path.parent.name.endswith(f"({book})")


def answer_rank(results: Sequence[Passage], question: Question) -> int | None:
    """0-based rank of the first result that answers the question, None when none does."""
    for rank, passage in enumerate(results):
        if is_from_book(passage, question.book) and contains_phrase(passage.text, question.phrase):
            return rank
    return None


def store_settings(scratch: Path) -> StoreSettings:
    return StoreSettings(alexandria_data_dir=scratch, qdrant_host=None, qdrant_url=None, qdrant_local_path=None)


@asynccontextmanager
async def embedder_service(scratch: Path) -> AsyncIterator[EmbedderClient]:
    """The real embedder server (default model) in this process, on a unix socket in the scratch dir."""
    server = embedder_server.create_server(EmbedderSettings(embedder_listen=f"unix://{scratch / 'embedder.sock'}"))
    await server.start()
    client = EmbedderClient(server.address, ClientSettings())
    try:
        yield client
    finally:
        await client.close()
        await server.stop(grace=1)


def ingested_file_names(store: Store, collection: str) -> set[str]:
    if store.collection_info(collection) is None:
        return set()
    paths = store.facet_counts(collection, f.FILE_PATH, Filter(must={f.COMPLETE: True}))
    return {Path(str(p)).name for p in paths}


async def ingest_corpus(
    store: Store, embedder: EmbedderClient, files: Sequence[Path], collection: str,
    on_written: Callable[[str], None] = lambda collection: None,
) -> None:
    """Ingest `files` into `collection` with the ingest pipeline, as local files, default parameters.

    `on_written` is called with the collection after each book, as the ingest service does to
    keep the index up to date.
    """
    ingestor = BookIngestor(store, embedder, on_written)
    for path in files:
        started = time.perf_counter()
        source = await asyncio.to_thread(local_book_file, path)
        await ingestor.ingest(source, collection, ChunkingParams(), True, lambda *progress: None)
        log.info("ingested %s in %.1f s", path.name, time.perf_counter() - started)


def local_book_file(path: Path) -> BookFile:
    """A corpus file as the ingest service reads a local file: its metadata from the file itself."""
    extracted = extract_book(path)
    return BookFile(path, extracted.format, content_key(path), extracted.title, extracted.authors,
                    extracted.language, None, extracted)


@dataclass(frozen=True)
class ModeScore:
    recall: float
    mrr: float
    answered_at_default: float
    by_kind: dict[str, tuple[float, float]]  # kind -> (recall, mrr)


async def evaluate(searcher: Searcher, questions: Sequence[Question], mode: SearchMode) -> ModeScore:
    ranks: list[int | None] = []
    answered = 0
    for q in questions:
        ranked = await searcher.search(
            SearchQuery(q.question, COLLECTION, limit=MRR_AT, threshold=0.0, search_mode=mode), UNLIMITED_BUDGET
        )
        ranks.append(answer_rank(ranked.results, q))
        at_default = await searcher.search(
            SearchQuery(q.question, COLLECTION, limit=RECALL_AT, threshold=DEFAULT_THRESHOLD, search_mode=mode),
            UNLIMITED_BUDGET,
        )
        answered += bool(at_default.results)

    def score(selected: list[int | None]) -> tuple[float, float]:
        recall = sum(r is not None and r < RECALL_AT for r in selected) / len(selected)
        mrr = sum(1 / (r + 1) for r in selected if r is not None and r < MRR_AT) / len(selected)
        return recall, mrr

    recall, mrr = score(ranks)
    kinds = sorted({q.kind for q in questions})
    by_kind = {k: score([r for r, q in zip(ranks, questions, strict=True) if q.kind == k]) for k in kinds}
    return ModeScore(recall, mrr, answered / len(questions), by_kind)


async def run(corpus: Path, scratch: Path) -> dict[SearchMode, ModeScore]:
    questions = load_questions()
    files = sorted({book_file(corpus, q.book) for q in questions})
    scratch.mkdir(parents=True, exist_ok=True)
    store = open_store(store_settings(scratch))
    try:
        async with embedder_service(scratch) as embedder:
            missing = [p for p in files if p.name not in ingested_file_names(store, COLLECTION)]
            if missing:
                log.info("ingesting %d of %d books into %s", len(missing), len(files), scratch)
                await ingest_corpus(store, embedder, missing, COLLECTION)
            await asyncio.to_thread(store.optimize, COLLECTION)
            searcher = Searcher(store, EmbedderQueryEncoder(embedder))
            return {mode: await evaluate(searcher, questions, mode) for mode in MODES}
    finally:
        store.close()


def report(scores: dict[SearchMode, ModeScore], questions: int) -> str:
    kinds = sorted(next(iter(scores.values())).by_kind)
    header = f"{'mode':<10} {'recall@5':>9} {'MRR@10':>8} {'answered@0.5':>13}" + "".join(
        f" {k + ' R@5':>15} {k + ' MRR':>15}" for k in kinds
    )
    lines = [f"{questions} questions, {RECALL_AT=}, {MRR_AT=}; semantic is the baseline", header]
    for mode, s in scores.items():
        lines.append(
            f"{mode.value:<10} {s.recall:>9.3f} {s.mrr:>8.3f} {s.answered_at_default:>13.3f}"
            + "".join(f" {s.by_kind[k][0]:>15.3f} {s.by_kind[k][1]:>15.3f}" for k in kinds)
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH, help="kept between runs")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging("bench.retrieval", "WARNING")
    log.setLevel(logging.INFO)
    scores = asyncio.run(run(args.corpus, args.scratch))
    print(report(scores, len(load_questions())))
    print(json.dumps({
        mode.value: {"recall@5": round(s.recall, 4), "mrr@10": round(s.mrr, 4),
                     "answered@0.5": round(s.answered_at_default, 4)}
        for mode, s in scores.items()
    }))


if __name__ == "__main__":
    main()
