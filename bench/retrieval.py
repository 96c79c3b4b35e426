"""Retrieval quality of alexandria_query: does the passage that answers a question come back, and how high?

    .venv/bin/python -m bench.retrieval [--model PATH_OR_PACKAGE ...] [--profile baseline|fast|best ...]
                                        [--language ja --language hr ...] [--hint none|llm|blind ...]
                                        [--split tuning|check|widened ...] [--no-gateway] [--corpus ../shared/corpus] [--scratch bench/out/retrieval]

Questions: bench/retrieval_questions/*.yaml (bench/questions.py says what makes one sound), split by
book into a tuning half and a check half, and a widened set over books neither holds (English, to choose
the default profile on). Tune on the tuning half only; the check half is the score.

Hint sets (`--hint`, repeatable; default all): each question asked with no hypothetical_passage ("none"),
with the one an LLM wrote for it without the book ("llm"), and with the question restated ("blind")
(bench/retrieval_hints/, the prompt in its PROMPT.md); the off-topic questions get invented passages. The
hinted sets are asked in hybrid mode, and their figures are under "hints" in the JSON.

Quotes: each question's phrase of QUOTE_MIN_WORDS or more words is asked as the query itself (hybrid, the
tool's defaults), as a caller who remembers a line and wants the passage that holds it; the answer is the
same passage. Their figures are under "quotes" in the JSON, recall@1 among them.
Each book's questions are in its language (English, German, French, Japanese, Croatian); `--language`
(repeatable) asks only those in the languages named, and ingests only their books; `--split` likewise for the
tuning half, the check half or the widened set.

1. For each model (`--model`, repeatable; default: the embedder's default model) under each profile
   (`--profile`, repeatable: EMBEDDER_PROFILE values; a profile's own model unless --model is given), the
   books of the question set are ingested into a scratch embedded store of that configuration's own (one
   for each recorded model name: backend and precision included), once: the store is kept between runs
   and only missing books are ingested (the ingest pipeline, default chunking).
2. Every question is asked through the query domain (`services.query.search.Searcher`, no gRPC in
   front; the query vector comes from an in-process embedder server) in each search mode, at the
   tool's default threshold and at threshold 0, with limit QUERY_LIMIT.high. The default limit's results
   are the first QUERY_LIMIT.default of those (the candidate pool does not depend on the limit).
3. With the first configuration, every question is then asked again through the gateway, as an MCP client
   would (the stack as `alexandria up` runs it, on the same store; `alexandria_query` with every
   argument at its default): the same figures, and the query's p50 through the gateway.

A question is answered at rank r when the r-th result comes from its book and contains its phrase
(case and spacing aside); `empty` counts questions answered with no passage at all.
The last line is JSON: check.recall@5, check.mrr@10, check.empty, tuning.recall@5 (default model,
default mode, the tool's defaults, in process; the English, German and French questions, HEADLINE_LANGUAGES), the same under "threshold0", under "gateway" (with
p50_ms), every model/mode/threshold row under "rows", each hybrid row's figures by language under
"languages" (row, then language, then "tuning", "check" and "all"), and each configuration's profile,
model and query_encode_ms under "profiles".
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from alexandria.clients import EmbedderClient
from alexandria.contract import QUERY_LIMIT, QUERY_THRESHOLD
from alexandria.settings import EmbedderProfile, EmbedderSettings
from alexandria.store import open_store
from bench.basics import OUT
from bench.common import (
    DEFAULT_CORPUS,
    bench_logging,
    corpus_stack,
    embedder_service,
    ingest_corpus,
    ingested_file_names,
    percentile_ms,
    store_settings,
)
from bench.questions import (
    HEADLINE_LANGUAGES,
    HINT_SETS,
    OFF_TOPIC_KINDS,
    SPLITS,
    OffTopic,
    Question,
    book_file,
    contains_phrase,
    load_books,
    load_hints,
    load_off_topic,
    load_questions,
)
from services.embedder.loading import DEFAULT_MODEL_PACKAGE, name_suffix, resolve_device
from services.embedder.profiles import require_fetched, resolve_profile
from services.ingest.extract import extract_book
from services.ingest.segment import segment
from services.query.search import (
    Passage,
    Searcher,
    SearchMode,
    SearchQuery,
)
from services.query.server import EmbedderQueryEncoder

DEFAULT_SCRATCH = OUT / "retrieval"
COLLECTION = "retrieval_bench"
RECALL_AT = (1, 5, 10, 20)
# A phrase of this many words or more is a line someone could quote (a shorter one is a few key words). Counted by
# spaces, so the Japanese phrases are never quotes here.
QUOTE_MIN_WORDS = 4
MRR_AT = 10
MODES = (SearchMode.HYBRID, SearchMode.SEMANTIC, SearchMode.LEXICAL)
THRESHOLDS = {"default": QUERY_THRESHOLD.default, "threshold0": 0.0}
# Questions no book of the set answers: what the default threshold should turn away (with a notice). Each comes
# with the confident passage an LLM might invent for it (the hypothetical_passage of the "llm" and "blind" sets):
# a passage must not make the tool answer a question it would turn away without one.
OFF_TOPIC = {
    "How do I replace the brake pads on a car?":
        "Loosen the lug nuts, jack up the car and remove the wheel. Unbolt the caliper, slide out the worn pads "
        "and fit the new ones, then press the piston back before refitting the caliper.",
    "What is the time complexity of quicksort?":
        "Quicksort runs in O(n log n) time on average, but in the worst case, when the pivot is always the "
        "smallest or largest element, it degrades to O(n^2).",
    "Which vaccines does a puppy need in its first year?":
        "Your puppy should receive the distemper, parvovirus and adenovirus vaccines at six to eight weeks, with "
        "boosters every few weeks until sixteen weeks, and a rabies shot by the time she is six months old.",
    "How does a lithium-ion battery store energy?":
        "When the battery charges, lithium ions move from the cathode through the electrolyte and are stored "
        "between the graphite layers of the anode; discharging sends them back, driving electrons through the circuit.",
    "What were the causes of the 2008 financial crisis?":
        "The crisis grew out of a housing bubble fed by subprime mortgages, which banks packaged into securities "
        "and sold on; when house prices fell, the losses spread through an overleveraged financial system.",
    "Comment installer un serveur Linux ?":
        "Téléchargez l'image ISO de la distribution, gravez-la sur une clé USB et démarrez le serveur dessus. "
        "Suivez l'assistant d'installation, partitionnez le disque puis configurez le réseau et l'accès SSH.",
    "Wie funktioniert ein Kernreaktor?":
        "Im Reaktorkern spalten Neutronen Urankerne; dabei wird Wärme frei, die das Kühlwasser erhitzt. Der "
        "Dampf treibt eine Turbine an, und Steuerstäbe regeln die Kettenreaktion.",
    "Best practices for Kubernetes ingress configuration":
        "Define one Ingress resource per host, terminate TLS at the ingress controller with certificates from "
        "cert-manager, and set explicit path types and timeouts in the controller's annotations.",
    "Recipe for sourdough bread with a long cold proof":
        "Mix the flour, water and levain, rest an hour, then add the salt. Stretch and fold every half hour, "
        "shape the loaf and leave it in the refrigerator overnight before baking it in a hot Dutch oven.",
    "Who won the football world cup in 2014?":
        "Germany won the 2014 World Cup in Brazil, beating Argentina one-nil in the final at the Maracanã, "
        "when Mario Götze scored in extra time.",
}
# The group OFF_TOPIC's questions are reported under, apart from the sets of 40 a language.
FIRST_TEN = "first_ten"
UNLIMITED_BUDGET = 10**9

log = logging.getLogger("bench.retrieval")


def is_from_book(file_path: str, calibre_id: int | None, book: int | str) -> bool:
    """Whether a result comes from the question's book, however it was ingested (Calibre id or path)."""
    path = Path(file_path)
    if isinstance(book, str):
        return path.name == Path(book).name
    return calibre_id == book or path.parent.name.endswith(f"({book})")


def answer_rank(results: Sequence[Passage], question: Question) -> int | None:
    """0-based rank of the first result that answers the question, None when none does."""
    for rank, passage in enumerate(results):
        if is_from_book(passage.file_path, passage.calibre_id, question.book) and contains_phrase(
            passage.text, question.phrase
        ):
            return rank
    return None


@dataclass(frozen=True)
class Answer:
    """Where one question's answer came back, for one configuration."""

    question: Question
    rank: int | None   # 0-based rank in the results, None when not among them
    returned: int      # how many passages came back


@dataclass(frozen=True)
class Scores:
    recall: dict[int, float]
    mrr: float
    empty: int
    questions: int

    @classmethod
    def of(cls, answers: Sequence[Answer], limit: int = QUERY_LIMIT.high) -> Scores:
        return cls.of_ranks([a.rank for a in answers], [a.returned for a in answers], limit)

    @classmethod
    def of_ranks(cls, ranks: Sequence[int | None], returned: Sequence[int], limit: int = QUERY_LIMIT.high) -> Scores:
        """From each question's 0-based answer rank (None: not found) and how many passages came back."""
        n = max(1, len(ranks))
        return cls(
            recall={k: sum(r is not None and r < k for r in ranks) / n for k in RECALL_AT if k <= limit},
            mrr=sum(1 / (r + 1) for r in ranks if r is not None and r < MRR_AT) / n,
            empty=sum(count == 0 for count in returned),
            questions=len(ranks),
        )

    def as_dict(self) -> dict[str, float]:
        return {**{f"recall@{k}": round(v, 4) for k, v in self.recall.items()}, "mrr@10": round(self.mrr, 4),
                "empty": self.empty, "questions": self.questions}


def by_split(answers: Sequence[Answer], limit: int = QUERY_LIMIT.high) -> dict[str, Scores]:
    return {split: Scores.of([a for a in answers if a.question.split == split], limit) for split in SPLITS}


def headline(answers: Sequence[Answer]) -> list[Answer]:
    """The answers the headline figures count: HEADLINE_LANGUAGES' questions, or all when none was asked."""
    return [a for a in answers if a.question.language in HEADLINE_LANGUAGES] or list(answers)


def by_language(answers: Sequence[Answer], limit: int = QUERY_LIMIT.high) -> dict[str, dict[str, Scores]]:
    """Each language's halves, and its questions of both halves together under "all"."""
    scores = {}
    for language in sorted({a.question.language for a in answers}):
        mine = [a for a in answers if a.question.language == language]
        scores[language] = {**by_split(mine, limit), "all": Scores.of(mine, limit)}
    return scores


async def ask_all(
    searcher: Searcher, questions: Sequence[Question], mode: SearchMode, threshold: float, hints: dict[str, str]
) -> list[Answer]:
    """Every question (with its hint as the hypothetical passage; only those that have one when `hints` is not
    empty), in `mode`, at `threshold`."""
    answers = []
    for q in (q for q in questions if not hints or q.question in hints):
        outcome = await searcher.search(
            SearchQuery(q.question, COLLECTION, limit=QUERY_LIMIT.high, threshold=threshold, search_mode=mode,
                        passage=hints.get(q.question)),
            UNLIMITED_BUDGET,
        )
        answers.append(Answer(q, answer_rank(outcome.results, q), len(outcome.results)))
    return answers


async def query_encode_ms(embedder: EmbedderClient, questions: Sequence[Question]) -> float:
    seconds = []
    for q in questions[:100]:
        started = time.perf_counter()
        await embedder.embed_query(q.question)
        seconds.append(time.perf_counter() - started)
    return percentile_ms(seconds, 50)


@dataclass(frozen=True)
class Configuration:
    """One embedder configuration to evaluate: EMBEDDER_MODEL and EMBEDDER_PROFILE (None: the environment's)."""

    model: str | None
    profile: EmbedderProfile | None

    def settings(self) -> EmbedderSettings:
        return EmbedderSettings(embedder_model=self.model, **({"embedder_profile": self.profile} if self.profile else {}))

    def env(self) -> dict[str, str]:
        """The same configuration as environment variables, for a stack's processes."""
        return {**({"EMBEDDER_MODEL": self.model} if self.model else {}),
                **({"EMBEDDER_PROFILE": self.profile} if self.profile else {})}


def model_slug(configuration: Configuration) -> str:
    """The scratch folder of a configuration's store: its model's folder or package, and the backend and
    precision when their vectors differ (the suffix of the model name the embedder records)."""
    settings = configuration.settings()
    device = resolve_device(settings.embedder_device)
    choice = resolve_profile(settings, device)
    require_fetched(choice, settings.embedder_models_dir)
    suffix = name_suffix(device, choice.backend, choice.quantize)
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", Path(choice.model or DEFAULT_MODEL_PACKAGE).name) + suffix


@dataclass
class ModelRun:
    model: str
    profile: str
    answers: dict[tuple[SearchMode, str, str], list[Answer]]  # by mode, threshold label and hint set
    ingest_s: float
    store_bytes: int
    books: int
    off_topic_answered: dict[str, dict[str, list[str]]]  # by hint set, then group: those answered at the defaults
    query_encode_ms: float   # p50 of one question's Embed, in process
    sentences: int           # in the books ingested by this run (0: the store was already there)
    quotes: dict[str, list[Answer]]  # each phrase asked as the query (quotes()), hybrid, by threshold label


async def evaluate_model(
    corpus: Path, scratch: Path, configuration: Configuration, questions: Sequence[Question],
    hints: dict[str, dict[str, str]], off_topic_questions: Sequence[OffTopic],
) -> ModelRun:
    scratch.mkdir(parents=True, exist_ok=True)
    files = sorted({book_file(corpus, q.book) for q in questions})
    store = open_store(store_settings(scratch))
    ingest_s, sentences = 0.0, 0
    try:
        async with embedder_service(scratch, configuration.model, configuration.profile) as embedder:
            name = (await embedder.model_info()).name
            missing = [p for p in files if p.name not in ingested_file_names(store, COLLECTION)]
            if missing:
                log.info("%s: ingesting %d of %d books into %s", name, len(missing), len(files), scratch)
                started = time.perf_counter()
                await ingest_corpus(store, embedder, missing, COLLECTION)
                ingest_s = time.perf_counter() - started
                sentences = sum(len(segment(extract_book(path))) for path in missing)
            await asyncio.to_thread(store.optimize, COLLECTION)
            searcher = Searcher(store, EmbedderQueryEncoder(embedder))
            answers = {
                (mode, label, hint): await ask_all(searcher, questions, mode, threshold, hints[hint])
                for hint in hints for mode in (MODES if hint == "none" else (SearchMode.HYBRID,))
                for label, threshold in THRESHOLDS.items()
            }
            asked_quotes = {label: await ask_all(searcher, quotes(questions), SearchMode.HYBRID, threshold, {})
                            for label, threshold in THRESHOLDS.items()}
            off_topic = {hint: await off_topic_answered(searcher, off_topic_questions, hint != "none") for hint in hints}
            encode_ms = await query_encode_ms(embedder, questions)
    finally:
        store.close()
    # Blocks on disk: the engine's files are sparse (their sizes count space never written).
    store_bytes = sum(p.stat().st_blocks * 512 for p in (scratch / "store").rglob("*") if p.is_file())
    profile = resolve_profile(configuration.settings(), resolve_device("auto")).profile
    return ModelRun(name, profile, answers, ingest_s, store_bytes, len(files), off_topic, encode_ms, sentences,
                    asked_quotes)


def off_topic_set(languages: Sequence[str]) -> list[OffTopic]:
    """The off-topic questions asked: OFF_TOPIC (FIRST_TEN, reported apart) and bench/retrieval_offtopic's, in
    `languages` when some are named."""
    first_ten = [OffTopic(text, passage, FIRST_TEN, "en") for text, passage in OFF_TOPIC.items()]
    return [o for o in [*first_ten, *load_off_topic()] if not languages or o.language in languages]


async def off_topic_answered(searcher: Searcher, asked: Sequence[OffTopic], hinted: bool) -> dict[str, list[str]]:
    """The off-topic questions given a passage at the tool's defaults, by kind (FIRST_TEN apart)."""
    answered: dict[str, list[str]] = {kind: [] for kind in (FIRST_TEN, *OFF_TOPIC_KINDS)}
    for o in asked:
        outcome = await searcher.search(SearchQuery(o.question, COLLECTION, passage=o.passage if hinted else None),
                                        UNLIMITED_BUDGET)
        if outcome.results:
            answered[o.kind].append(o.question)
    return answered


def off_topic_summary(answered: dict[str, list[str]], asked: Sequence[OffTopic]) -> dict[str, Any]:
    """Each group's count answered and asked, and the share of the sets of 40 a language answered."""
    counts = {kind: [len(names), sum(o.kind == kind for o in asked)] for kind, names in answered.items()}
    new = [n for kind, n in counts.items() if kind != FIRST_TEN]
    return {**counts, "share_answered": round(sum(a for a, _ in new) / max(1, sum(t for _, t in new)), 4)}


def quotes(questions: Sequence[Question]) -> list[Question]:
    """The questions whose phrase is a quote (QUOTE_MIN_WORDS words or more), with the phrase as the question."""
    return [dataclasses.replace(q, question=q.phrase) for q in questions if len(q.phrase.split()) >= QUOTE_MIN_WORDS]


async def ask_through_gateway(
    corpus: Path, scratch: Path, questions: Sequence[Question], configuration: Configuration,
    hint_sets: dict[str, dict[str, str]],
) -> dict[str, tuple[list[Answer], list[float]]]:
    """Every question through a real MCP client and the stack (embedding as `configuration` says) on
    `scratch`'s store, tool defaults, once for each hint set (its hint as hypothetical_passage; a set that is not
    empty asks only the questions it has one for): each hint set's answers and seconds. A question is asked
    with each set in turn before the next question, so that the sets' timings share the box's moods."""
    from mcp import Client

    stack = await asyncio.to_thread(
        corpus_stack, scratch, corpus, {"QDRANT_COLLECTION": COLLECTION, **configuration.env()},
    )
    asked: dict[str, tuple[list[Answer], list[float]]] = {name: ([], []) for name in hint_sets}
    try:
        async with Client(stack.mcp_url) as client:
            for q in questions:
                for name, hints in hint_sets.items():
                    if hints and q.question not in hints:
                        continue
                    arguments = {"query": q.question} | ({"hypothetical_passage": hints[q.question]} if hints else {})
                    started = time.perf_counter()
                    result = await client.call_tool("alexandria_query", arguments)
                    asked[name][1].append(time.perf_counter() - started)
                    if result.is_error:
                        raise SystemExit(f"alexandria_query failed on {q.question!r}: {result.content}")
                    passages = (result.structured_content or {}).get("results", [])
                    rank = next(
                        (i for i, p in enumerate(passages)
                         if is_from_book(p.get("file_path", ""), p.get("calibre_id"), q.book)
                         and contains_phrase(p.get("text", ""), q.phrase)),
                        None,
                    )
                    asked[name][0].append(Answer(q, rank, len(passages)))
    finally:
        await asyncio.to_thread(stack.stop)
    return asked


def row_name(model_run: ModelRun) -> str:
    """A run's label in the tables: its recorded model name, short (a backend/precision suffix kept)."""
    base, plus, suffix = model_run.model.partition("+")
    return f"{base[:18]}{plus}{suffix}"


def table(title: str, rows: dict[str, dict[str, Scores]]) -> str:
    """One line per row: recall@k, MRR@10 and empty questions of each half."""
    columns = [f"{split} {name}" for split in SPLITS for name in ("R@1", "R@5", "R@10", "R@20", "MRR", "empty")]
    lines = [title, f"{'':<44}" + "".join(f"{c:>12}" for c in columns)]
    for label, halves in rows.items():
        cells = []
        for split in SPLITS:
            s = halves[split]
            cells += [f"{s.recall.get(k, float('nan')):.3f}" for k in RECALL_AT] + [f"{s.mrr:.3f}", f"{s.empty}"]
        lines.append(f"{label:<44}" + "".join(f"{c:>12}" for c in cells))
    return "\n".join(lines)


def language_table(rows: dict[str, dict[str, dict[str, Scores]]]) -> str:
    """One line per row and language: questions, then recall@5 / MRR@10 of each half and of both."""
    lines = ["by language (hybrid): questions, recall@5 / MRR@10 of tuning, check, all",
             f"{'':<44}{'lang':>6}{'n':>6}" + "".join(f"{half:>16}" for half in (*SPLITS, "all"))]
    for label, languages in rows.items():
        for language, halves in languages.items():
            lines.append(f"{label:<44}{language:>6}{halves['all'].questions:>6}"
                         + "".join(f"{halves[h].recall[5]:>9.3f} {halves[h].mrr:.3f}" for h in (*SPLITS, "all")))
    return "\n".join(lines)


def per_book(answers: Sequence[Answer]) -> str:
    lines = ["by book (default mode, threshold 0): questions, recall@5, MRR@10"]
    titles = {b.book: (b.title, b.split) for b in load_books()}
    for book, (title, split) in titles.items():
        mine = [a for a in answers if a.question.book == book]
        if not mine:  # a book of a language not asked (--language)
            continue
        s = Scores.of(mine)
        lines.append(f"  {split:<7} {title[:40]:<40} {len(mine):>4} {s.recall[5]:>7.3f} {s.mrr:>7.3f}")
    return "\n".join(lines)


def summary(halves: dict[str, Scores]) -> dict[str, Any]:
    return {f"{split}.{name}": value for split in SPLITS if halves[split].questions
            for name, value in (("recall@5", round(halves[split].recall[5], 4)), ("mrr@10", round(halves[split].mrr, 4)),
                                ("empty", halves[split].empty))}


def limit_of(label: str) -> int:
    """The limit a threshold label's figures count results to: the tool's default limit at its defaults."""
    return QUERY_LIMIT.default if label == "default" else QUERY_LIMIT.high


def limited(answers: Sequence[Answer], label: str) -> list[Answer]:
    """`answers` as a search with the label's limit would have returned them (they were asked at the highest)."""
    limit = limit_of(label)
    return [Answer(a.question, a.rank if a.rank is None or a.rank < limit else None, min(a.returned, limit))
            for a in answers]


def row_label(model_run: ModelRun, mode: SearchMode, label: str, hint: str) -> str:
    return f"{row_name(model_run)} {mode.value} {label}" + (f" hint={hint}" if hint != "none" else "")


async def run(
    corpus: Path, scratch: Path, configurations: Sequence[Configuration], gateway: bool, languages: Sequence[str] = (),
    hint_sets: Sequence[str] = HINT_SETS, splits: Sequence[str] = (),
) -> dict[str, Any]:
    questions = [q for q in load_questions()
                 if (not languages or q.language in languages) and (not splits or q.split in splits)]
    if not questions:
        raise SystemExit(f"no question is in {', '.join(languages)}; the question set's languages are "
                         f"{', '.join(sorted({q.language for q in load_questions()}))}")
    hints = {name: load_hints(name) for name in dict.fromkeys(["none", *hint_sets])}
    off_topic = off_topic_set(languages)
    runs = [await evaluate_model(corpus, scratch / model_slug(c), c, questions, hints, off_topic)
            for c in configurations]
    rows: dict[str, dict[str, Scores]] = {}
    language_rows: dict[str, dict[str, dict[str, Scores]]] = {}
    for model_run in runs:
        for (mode, label, hint), answers in model_run.answers.items():
            asked = limited(answers, label)
            row = row_label(model_run, mode, label, hint)
            rows[row] = by_split(headline(asked), limit_of(label))
            if mode is SearchMode.HYBRID:
                language_rows[row] = by_language(asked, limit_of(label))
    first = runs[0]
    print(table(f"{sum(q.language in HEADLINE_LANGUAGES for q in questions) or len(questions)} questions (headline); 'default' = the tool's defaults (limit {QUERY_LIMIT.default}, threshold "
                f"{QUERY_THRESHOLD.default}), 'threshold0' = limit {QUERY_LIMIT.high}, threshold 0", rows))
    print(language_table(language_rows))
    quote_rows = {f"{row_name(r)} hybrid {label} quotes": by_split(headline(limited(answers, label)), limit_of(label))
                  for r in runs for label, answers in r.quotes.items()}
    print(table(f"{len(quotes(questions))} quotes: each phrase of {QUOTE_MIN_WORDS}+ words asked as the query", quote_rows))
    print(per_book(first.answers[(SearchMode.HYBRID, "threshold0", "none")]))
    for model_run in runs:
        print(f"{model_run.model} (profile {model_run.profile}): {model_run.books} books, store {model_run.store_bytes / 1e6:.1f} MB "
              f"({model_run.store_bytes / model_run.books / 1e6:.2f} MB a book), query encode p50 "
              f"{model_run.query_encode_ms:.1f} ms"
              + (f", ingested in {model_run.ingest_s:.0f} s ({model_run.sentences / model_run.ingest_s:.0f} "
                 "sentences/s)" if model_run.ingest_s else ""))
        for hint, answered in model_run.off_topic_answered.items():
            counts = off_topic_summary(answered, off_topic)
            print(f"  off-topic questions answered at the defaults, hint {hint}: "
                  + ", ".join(f"{kind} {n}/{total}" for kind, (n, total) in
                              ((k, v) for k, v in counts.items() if k != "share_answered"))
                  + f" (the sets of 40 a language: {counts['share_answered']:.1%})")
            for kind, names in answered.items():
                for name in names:
                    log.info("answered off-topic (%s, hint %s): %s", kind, hint, name)
        for hint in hints:
            plain, unlimited = (by_split(headline(limited(model_run.answers[(SearchMode.HYBRID, label, hint)], label)), 5)
                                for label in THRESHOLDS)
            print(f"  answers the default threshold costs, hint {hint} (recall@5 at {QUERY_THRESHOLD.default} against 0): "
                  + ", ".join(f"{split} {plain[split].recall[5]:.3f} / {unlimited[split].recall[5]:.3f}"
                              for split in SPLITS if plain[split].questions))
    result: dict[str, Any] = {
        **summary(rows[f"{row_name(first)} hybrid default"]),
        "threshold0": summary(rows[f"{row_name(first)} hybrid threshold0"]),
        "profile": first.profile,
        "query_encode_ms": round(first.query_encode_ms, 2),
        "profiles": [{"profile": r.profile, "model": r.model, "query_encode_ms": round(r.query_encode_ms, 2)}
                     for r in runs],
        "off_topic_answered": {hint: off_topic_summary(answered, off_topic)
                               for hint, answered in first.off_topic_answered.items()},
        "hints": {hint: summary(rows[row_label(first, SearchMode.HYBRID, "default", hint)]) for hint in hints},
        "quotes": {**summary(quote_rows[f"{row_name(first)} hybrid default quotes"]),
                   **{f"{split}.recall@1": round(scores.recall[1], 4)
                      for split, scores in quote_rows[f"{row_name(first)} hybrid default quotes"].items()}},
        "rows": {label: {split: s.as_dict() for split, s in halves.items()} for label, halves in rows.items()},
        "languages": {label: {language: {half: s.as_dict() for half, s in halves.items()}
                              for language, halves in by_lang.items()}
                      for label, by_lang in language_rows.items()},
    }
    if gateway:
        # Without a passage and with the LLM's (when asked for), in one stack, a question with each in turn.
        through_gateway = await ask_through_gateway(
            corpus, scratch / model_slug(configurations[0]), questions, configurations[0],
            {hint: hints[hint] for hint in ("none", "llm") if hint in hints},
        )
        plain_seconds = dict(zip((a.question.question for a in through_gateway["none"][0]), through_gateway["none"][1],
                                 strict=True))
        for hint, (answers, seconds) in through_gateway.items():
            through = by_split(headline(answers), QUERY_LIMIT.default)
            p50 = percentile_ms(seconds, 50)
            # The same questions without a passage: the price of the passage, question for question.
            plain_p50 = percentile_ms([plain_seconds[a.question.question] for a in answers], 50)
            print(table(f"through the gateway (MCP client, tool defaults, hint {hint}): p50 {p50:.1f} ms, the same "
                        f"questions without a passage {plain_p50:.1f} ms", {"gateway": through}))
            result["gateway" if hint == "none" else f"gateway_hint_{hint}"] = {
                **summary(through), "p50_ms": round(p50, 2), "p50_ms_without_passage": round(plain_p50, 2)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH, help="kept between runs")
    parser.add_argument("--model", action="append", help="EMBEDDER_MODEL values to compare (default: the default)")
    parser.add_argument("--profile", action="append", choices=get_args(EmbedderProfile),
                        help="EMBEDDER_PROFILE values to compare (default: EMBEDDER_PROFILE, else auto)")
    parser.add_argument("--language", action="append", default=[],
                        help="ask only the questions in this language (ISO 639-1, repeatable: --language ja)")
    parser.add_argument("--split", action="append", default=[], choices=SPLITS,
                        help="ask only this set's questions, and ingest only its books (repeatable)")
    parser.add_argument("--no-gateway", action="store_true", help="skip the pass through the MCP gateway")
    parser.add_argument("--hint", action="append", choices=HINT_SETS,
                        help="hint sets to ask with, as hypothetical_passage (repeatable; default: all of them)")
    args = parser.parse_args()
    bench_logging("retrieval")
    configurations = [Configuration(model, profile) for profile in args.profile or [None]
                      for model in args.model or [None]]
    result = asyncio.run(run(args.corpus, args.scratch.resolve(), configurations, not args.no_gateway, args.language,
                             args.hint or HINT_SETS, args.split))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
