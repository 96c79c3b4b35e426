"""What a score means under each profile: the signals of answers and of off-topic questions, and the relevance at
which a passage scores 0.5 (services/embedder/score_scale.py).

    .venv/bin/python -m bench.calibration --profile fast --profile multilingual   # record (each store kept)
    .venv/bin/python -m bench.calibration --report [--fit] [--at-half 0.384]       # replay

Reads the stores bench/retrieval.py leaves in its scratch folder (run it first for each profile: it ingests the books
once). For every question of the retrieval set whose book the store holds (tuning, check and widened halves, every
language) and every off-topic question (bench.retrieval's first ten and bench/retrieval_offtopic/), asked without a
passage and with the LLM's (an off-topic question: its invented passage), it records the first stage's candidates as
the search finds them (Searcher.measured_candidates), what the engine measured of each (ranking.Signals), which of
them answers the question, and the model's scale as its embedder reports it. One JSON file a profile, under
bench/out/calibration/.

The report replays each recorded search at the tool's defaults (threshold 0.5, limit 5; with a passage, its order and
its share of the threshold) at the embedder's relevance at half, at `--at-half`, and with `--fit` at the fitted one
(fit_at_half: from the tuning half alone). It prints, per hint, recall@5 / MRR@10 of each half, and per language the
off-topic questions (far subjects and other books) and missing facts that get a passage. Candidates kept for holding
every word of the question, and quotes put first, are not replayed: bench.retrieval measures the search whole (at
0.384 under multilingual both gave check 0.541 / 0.918 and widened 0.596).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np

from alexandria.contract import QUERY_LIMIT, QUERY_THRESHOLD
from alexandria.languages import language_code
from alexandria.model_languages import trained_languages
from alexandria.relevance import RELEVANCE_AT_HALF
from alexandria.settings import EmbedderProfile
from alexandria.store import Hit, SparseVector, open_store
from alexandria.store.lexical import encode_query
from alexandria.store.records import ChunkRecord
from bench.basics import OUT
from bench.common import DEFAULT_CORPUS, bench_logging, embedder_service, ingested_file_names, store_settings
from bench.questions import (
    HEADLINE_LANGUAGES,
    SPLITS,
    book_file,
    contains_phrase,
    load_hints,
    load_questions,
)
from bench.retrieval import (
    COLLECTION,
    DEFAULT_SCRATCH,
    Configuration,
    Scores,
    is_from_book,
    model_slug,
    off_topic_set,
)
from services.embedder.profiles import recorded_base_name
from services.query.ranking import (
    ScoreScale,
    Signals,
    best_first,
    hinted_order,
    relevance,
)
from services.query.search import Ranked, Searcher, SearchQuery, select_passages
from services.query.server import EmbedderQueryEncoder

DEFAULT_OUT = OUT / "calibration"
HINTS = ("none", "llm")
LIMIT = int(QUERY_LIMIT.default)
NO_TERMS = SparseVector([], [])
# The answers of the tuning half a fitted relevance at half may cost (of those threshold 0 finds), with a passage and
# without: a higher one turns away more off-topic questions, and the answers it costs are what the caller came for.
FIT_ANSWERS_LOST = 0
FIT_STEP = 0.005

log = logging.getLogger("bench.calibration")


@dataclass(frozen=True)
class Asked:
    """One question as asked once: its set (a half, or an off-topic kind), language, hint, and its candidates'
    signals (for the question, and for the passage when hinted) and whether each answers it."""

    group: str
    language: str
    hint: str
    question: Signals
    passage: Signals | None
    answers: np.ndarray  # bool, per candidate


def _signals_json(signals: Signals) -> dict[str, list[float]]:
    return {"chunk": signals.chunk_cosine.round(5).tolist(), "window": signals.window_cosine.round(5).tolist(),
            "lexical": signals.lexical.round(4).tolist()}


def _signals(data: dict[str, list[float]]) -> Signals:
    return Signals(np.array(data["chunk"]), np.array(data["window"]), np.array(data["lexical"]))


async def measure_profile(scratch: Path, out: Path, profile: EmbedderProfile) -> Path:
    """Record every question's candidates under `profile` from its retrieval bench store."""
    configuration = Configuration(None, profile)
    store_dir = scratch / model_slug(configuration)
    if not (store_dir / "store").is_dir():
        raise SystemExit(f"no retrieval bench store for {profile} under {store_dir}: run "
                         f".venv/bin/python -m bench.retrieval --profile {profile} --no-gateway --hint none first")
    store = open_store(store_settings(store_dir))
    llm = load_hints("llm")
    asked: list[dict[str, Any]] = []
    try:
        async with embedder_service(store_dir, None, profile) as embedder:
            info = await embedder.model_info()
            encoder = EmbedderQueryEncoder(embedder)
            searcher = Searcher(store, encoder)
            held = ingested_file_names(store, COLLECTION)
            on_topic = [(q.split, q.language, q.question, llm.get(q.question), q) for q in load_questions()
                        if book_file(DEFAULT_CORPUS, q.book).name in held]
            off_topic = [(o.kind, o.language, o.question, o.passage, None) for o in off_topic_set(())]
            await searcher.search(SearchQuery(on_topic[0][2], COLLECTION), 10**9)  # learns the collection's model
            for count, (group, language, text, passage, question) in enumerate(on_topic + off_topic, 1):
                if count % 100 == 0:
                    log.info("%s: %d of %d questions", profile, count, len(on_topic) + len(off_topic))
                for hint in HINTS:
                    hinted = passage if hint == "llm" else None
                    if hint == "llm" and hinted is None:
                        continue
                    query = SearchQuery(text, COLLECTION, passage=hinted)
                    vector = await encoder.encode(text, hinted)
                    hits, measured = await searcher.measured_candidates(
                        query, vector, encode_query(text), encode_query(hinted) if hinted else None)
                    answers = [False] * len(hits)
                    if question is not None and hits:
                        records = {r.id: ChunkRecord.from_payload(r.payload)
                                   for r in store.retrieve(COLLECTION, [hit.id for hit in hits])}
                        answers = [hit.id in records and is_from_book(records[hit.id].book.file_path,
                                                                      records[hit.id].book.calibre_id, question.book)
                                   and contains_phrase(records[hit.id].text, question.phrase) for hit in hits]
                    asked.append({"group": group, "language": language, "hint": hint, "answers": answers,
                                  "question": _signals_json(measured[0]) if measured else None,
                                  "passage": _signals_json(measured[1]) if len(measured) > 1 else None})
    finally:
        store.close()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{profile}.json"
    path.write_text(json.dumps({"profile": profile, "model": info.name, "similarity_floor": info.similarity_floor,
                                "relevance_at_half": info.relevance_at_half,
                                "asked": asked}), encoding="utf-8")
    log.info("%s: %d questions asked, written to %s", profile, len(asked), path)
    return path


def load_measured(path: Path) -> tuple[dict[str, Any], list[Asked]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    asked = [Asked(a["group"], a["language"], a["hint"],
                   _signals(a["question"]) if a["question"] else Signals(np.zeros(0), np.zeros(0), np.zeros(0)),
                   _signals(a["passage"]) if a["passage"] else None, np.array(a["answers"], dtype=bool))
             for a in data["asked"]]
    return data, asked


def selected(asked: Asked, floor: float, at_half: float, threshold: float) -> list[int]:
    """The candidates the search returns at `threshold` and the default limit, in order: search.select_passages over
    the recorded candidates, none of them kept for holding every word of the question (not recorded)."""
    if not len(asked.answers):
        return []
    scale = ScoreScale(floor, at_half)
    question_scores = relevance(asked.question, scale, semantic=True, lexical=True)
    order = best_first(question_scores)
    if asked.passage is not None:
        order = hinted_order(question_scores, relevance(asked.passage, scale, semantic=True, lexical=True))
    ranked = Ranked([Hit(str(i), 0.0, {}, frozenset()) for i in order], [float(question_scores[i]) for i in order])
    picked, _ = select_passages(ranked, NO_TERMS, threshold, LIMIT, hinted=asked.passage is not None)
    return [order[place] for place, _ in picked]


def answer_rank(asked: Asked, picked: Sequence[int]) -> int | None:
    return next((rank for rank, i in enumerate(picked) if asked.answers[i]), None)


def scores(questions: Sequence[Asked], picked: dict[int, list[int]]) -> Scores:
    """The questions' scores, from what the search returned for each (`picked`, by the question's id())."""
    return Scores.of_ranks([answer_rank(a, picked[id(a)]) for a in questions], [len(picked[id(a)]) for a in questions],
                           LIMIT)


def figures(asked: Sequence[Asked], floor: float, at_half: float, threshold: float) -> dict[str, Any]:
    """Per hint: each half's scores (English, German, French questions: the headline's), and per language its
    questions' scores, how many of its off-topic questions get a passage (far subjects and other books, the first ten
    among the English) and how many of its missing facts do."""
    result: dict[str, Any] = {}
    for hint in HINTS:
        mine = [a for a in asked if a.hint == hint]
        picked = {id(a): selected(a, floor, at_half, threshold) for a in mine}
        halves = {split: scores([a for a in mine if a.group == split and a.language in HEADLINE_LANGUAGES], picked)
                  for split in SPLITS}
        languages = {}
        for language in sorted({a.language for a in mine}):
            of_language = [a for a in mine if a.language == language]
            off = [bool(picked[id(a)]) for a in of_language if a.group not in (*SPLITS, "missing_fact")]
            missing = [bool(picked[id(a)]) for a in of_language if a.group == "missing_fact"]
            languages[language] = {"scores": scores([a for a in of_language if a.group in SPLITS], picked),
                                   "off_topic": (sum(off), len(off)), "missing_fact": (sum(missing), len(missing))}
        result[hint] = {"halves": halves, "languages": languages}
    return result


def fit_at_half(asked: Sequence[Asked], floor: float, languages: frozenset[str] | None) -> float:
    """The relevance to score 0.5: the highest (in steps of FIT_STEP) at which the tuning half, in the languages the
    model was trained on (`languages`, ISO 639-3; all when None), loses at most FIT_ANSWERS_LOST answers from its top
    five against threshold 0, both without a passage and with the LLM's. The check half and the widened set say how
    it holds on books it was not fitted on, the off-topic questions how many it turns away."""
    tuning = [a for a in asked if a.group == "tuning" and len(a.answers)
              and (not languages or language_code(a.language) in languages)]

    def found(at_half: float, threshold: float, hint: str) -> int:
        return sum(answer_rank(a, selected(a, floor, at_half, threshold)) is not None for a in tuning if a.hint == hint)

    best = FIT_STEP
    for at_half in np.arange(FIT_STEP, 1.0, FIT_STEP):
        if any(found(at_half, QUERY_THRESHOLD.default, hint) < found(at_half, 0.0, hint) - FIT_ANSWERS_LOST
               for hint in HINTS):
            break
        best = float(at_half)
    return best


def report(out: Path, fit: bool, at_half: float | None) -> None:
    """Each measured profile's figures at the relevance at half its embedder gave when measured, at the fitted one,
    and at `at_half`; languages the model was not trained on are starred."""
    for path in sorted(out.glob("*.json")):
        data, asked = load_measured(path)
        floor = data["similarity_floor"]
        trained = trained_languages(recorded_base_name(data["model"]))
        scales = {"embedder": data.get("relevance_at_half") or RELEVANCE_AT_HALF}
        if fit:
            scales["fitted"] = fit_at_half(asked, floor, trained.languages if trained else None)
        if at_half is not None:
            scales["asked"] = at_half
        for name, scale in scales.items():
            print(f"\n{data['profile']} ({data['model']}), floor {floor:.3f}, relevance at half {scale:.3f} ({name})")
            for label, threshold in (("default", QUERY_THRESHOLD.default), ("threshold0", 0.0)):
                for hint, result in figures(asked, floor, scale, threshold).items():
                    halves = "  ".join(f"{split} {result['halves'][split].recall[5]:.3f} / "
                                       f"{result['halves'][split].mrr:.3f}"
                                       for split in SPLITS if result["halves"][split].questions)
                    line = f"  {label:<10} hint {hint:<4} {halves}"
                    if label == "default":
                        line += "  |" + "".join(
                            f" {lang}{'' if not trained or language_code(lang) in trained.languages else '*'} "
                            f"R@5 {f['scores'].recall[5]:.2f} off {f['off_topic'][0]}/{f['off_topic'][1]} "
                            f"mf {f['missing_fact'][0]}/{f['missing_fact'][1]};"
                            for lang, f in result["languages"].items())
                    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", action="append", default=[], choices=get_args(EmbedderProfile),
                        help="measure this profile's candidates (repeatable)")
    parser.add_argument("--scratch", type=Path, default=DEFAULT_SCRATCH, help="bench/retrieval.py's scratch folder")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--report", action="store_true", help="report every measured profile's figures")
    parser.add_argument("--fit", action="store_true", help="report, with each profile's fitted relevance at half too")
    parser.add_argument("--at-half", type=float, help="report with this relevance at half too")
    args = parser.parse_args()
    bench_logging("calibration")
    for profile in args.profile:
        asyncio.run(measure_profile(args.scratch.resolve(), args.out, profile))
    if args.report or args.fit or args.at_half is not None:
        report(args.out, args.fit, args.at_half)
    if not (args.profile or args.report or args.fit or args.at_half is not None):
        parser.error("name a --profile to measure, or --report")


if __name__ == "__main__":
    main()
