"""The retrieval question set: one YAML file a book under bench/retrieval_questions/, and its checks.

Each file names its book, its language, the set it belongs to (`tuning`, `check` or `widened`, fixed by
book, so that nothing tuned on one book's questions can leak into another set) and its questions:

    book: 1                      # a Calibre id of corpus/calibre-library, a path under corpus/local-files,
                                 # or a book of the project's own (bench/books/...)
    title: Pride and Prejudice
    language: en                 # ISO 639-1, the book's own when it records one
    split: tuning
    questions:
      - question: What does everyone assume a rich single man must be looking for?
        phrase: must be in want of a wife

A returned passage answers a question when it comes from the question's book and contains its
`phrase` (case and spacing aside). A sound question:
- has a phrase that occurs exactly once in the text ingest extracts from the book, so a hit is
  the one passage meant, and of at least MIN_PHRASE_WORDS words (MIN_PHRASE_CHARS characters in
  Japanese, written without spaces);
- is asked in other words than the book's: no run of RUN_WORDS consecutive content words (stop
  words aside) of the question occurs in the book's text around the phrase (PASSAGE_MARGIN_CHARS
  on each side, about a chunk). Japanese has no spaces to find words by: there a word is a run of
  kanji or of katakana, and runs of hiragana (particles, inflections) stand between words as stop
  words do.

    .venv/bin/python -m bench.questions [FILE ...]    # prints every unsound question; exit 1 if any
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from bench.common import DEFAULT_CORPUS, ROOT

if TYPE_CHECKING:
    from services.ingest.documents import ExtractedBook

QUESTIONS_DIR = Path(__file__).resolve().parent / "retrieval_questions"
# What a caller passes as alexandria_query's hypothetical_passage for each question, one set a name: `llm_*.yaml`
# written by an LLM that had not seen the books, given the tool's description and the question alone (the
# prompt is in PROMPT.md beside them), `blind.yaml` the question restated as a statement, nothing added.
HINTS_DIR = Path(__file__).resolve().parent / "retrieval_hints"
HINT_SETS = ("none", "llm", "blind")
# Questions no book of the set answers, 40 a language: what the default threshold must turn away. `far`: the subjects
# people ask an assistant about (health, money, code, cooking, sport, travel ...); `other_book`: a well-known book the
# library does not hold; `missing_fact`: a library book's subject, but a fact that book does not hold.
OFF_TOPIC_DIR = Path(__file__).resolve().parent / "retrieval_offtopic"
OFF_TOPIC_KINDS = ("far", "other_book", "missing_fact")
# "widened": more English questions over books no other half holds, written later to check which profile answers
# best on books nothing was tuned on (the default profile is chosen there).
SPLITS = ("tuning", "check", "widened")
# The languages of the 222 questions that the headline figures (check.recall@5 ...) were first measured on;
# the Japanese and Croatian questions came later and are reported by language, so that the headline stays
# comparable with earlier runs.
HEADLINE_LANGUAGES = ("en", "de", "fr")
# Each question asked in these wordings (distinct_questions): distinct texts with the same meaning, so that no
# cache anywhere could answer one from an earlier one.
QUESTION_WORDINGS = (
    "{}",
    "In the books, {}",
    "{} Quote the passage.",
    "Tell me: {}",
    "I wonder, {}",
    "Find where the text says: {}",
    "{} Which passage shows it?",
    "Question: {}",
    "Please look up: {}",
    "{} Cite the book.",
)
# Books kept for checks on text the project has never seen: no question may come from them.
HELD_OUT_TITLES = ("king lear", "twelfth night", "mansfield park", "northanger abbey", "moby-dick", "moby dick")
# Calibre keeps one folder per book, "<Title> (<id>)"; this is the format ingest prefers.
FORMAT_PREFERENCE = (".epub", ".pdf")
PROJECT_BOOKS = "bench/books/"
MIN_PHRASE_WORDS = 3
MIN_PHRASE_CHARS = 8
RUN_WORDS = 3
PASSAGE_MARGIN_CHARS = 800

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# Kana and kanji, the scripts written without spaces between words.
_HIRAGANA, _KATAKANA, _KANJI = "\u3041-\u309f", "\u30a0-\u30ff\uff66-\uff9f", "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005"
_UNSPACED = re.compile(f"[{_HIRAGANA}{_KATAKANA}{_KANJI}]")
# A Japanese clause (one word to _WORD) split where the script changes: katakana, kanji, hiragana or other letters.
_SCRIPT_RUN = re.compile(f"[{_KATAKANA}]+|[{_KANJI}]+|[{_HIRAGANA}]+|[^{_HIRAGANA}{_KATAKANA}{_KANJI}]+")
_HIRAGANA_RUN = re.compile(f"[{_HIRAGANA}]+")
STOP_WORDS = frozenset(
    re.findall(
    r"\S+",
    # English
    "a about above after again against all am an and any are as at be because been before being below between "
    "both but by can could did do does doing down during each few for from further had has have having he her "
    "here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not "
    "now of off on once only or other our ours ourselves out over own same she should so some such than that the "
    "their theirs them themselves then there these they this those through to too under until up very was we "
    "were what when where which while who whom why will with would you your yours yourself yourselves upon shall "
    "may might must thee thou thy thine ye hath doth o oh "
    # German
    "der die das den dem des ein eine einen einem einer eines und oder aber wie was wer wo wann warum ist sind "
    "war waren wird werden wurde kann können könnte sie es er ich du wir ihr mit von zu zum zur im in an am auf "
    "aus bei für über unter nach vor nicht kein keine auch nur noch schon so als wenn dass ob sich man diese "
    "dieser dieses hat haben um "
    # French
    "le la les un une des du de d l et ou mais comme que qui quoi quel quelle quels quelles où quand comment "
    "pourquoi est sont était être avoir a ont il elle ils elles on je tu nous vous se sa son ses leur leurs ce "
    "cette ces dans sur sous avec pour par pas ne plus en au aux y si qu c s n",
    )
)
# Stop words of a language the words above would not cover, used for its files only (the sets above
# stay what the English, German and French files were checked with).
LANGUAGE_STOP_WORDS = {
    "hr": frozenset(re.findall(
        r"\S+",
        "i u je na se da za od su a ali ili kao što koji koja koje kojeg kojem kojim kojoj kako gdje kada kad "
        "zašto li ne to ta taj te ti tu s sa iz do po pri o k ka kod nad pod prije nakon bez biti bi sam si smo "
        "ste će ću ćete ćeš može mogu možete mogla mogao ja mi vi on ona ono oni one njegov njihov svoj svoja "
        "svoje svoju svog vaš vaša vaše vašu vašeg vašem vam vas moj moja moje me mene meni ga ih im joj ju jer "
        "ako pa no već još samo ovaj ova ovo ove ovog ovom ovoj onaj tako onda sve svi sva sav bilo bio bila "
        "čemu šta tko koga kome čega koliko tim tome toga nije nisu ima imati",
    )),
    # Japanese: question words and nouns that only carry grammar (hiragana is never a content word)
    "ja": frozenset(("何", "誰", "事", "時", "方", "際", "様")),
}


@dataclass(frozen=True)
class Question:
    book: int | str  # Calibre id, a path under corpus/local-files, or bench/books/...
    split: str
    question: str
    phrase: str
    language: str = "en"


@dataclass(frozen=True)
class BookQuestions:
    source: Path
    book: int | str
    title: str
    language: str
    split: str
    questions: tuple[Question, ...]


def load_book(path: Path) -> BookQuestions:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    book, split, language = data["book"], data["split"], data.get("language")
    if split not in SPLITS:
        raise ValueError(f"{path.name}: split must be one of {SPLITS}, not {split!r}")
    if not isinstance(language, str) or not re.fullmatch("[a-z]{2}", language):
        raise ValueError(f"{path.name}: give the book's language as an ISO 639-1 code (language: en), not {language!r}")
    questions = tuple(Question(book, split, q["question"], q["phrase"], language) for q in data["questions"])
    return BookQuestions(path, book, data["title"], language, split, questions)


def load_books(directory: Path = QUESTIONS_DIR) -> list[BookQuestions]:
    return [load_book(path) for path in sorted(directory.glob("*.yaml"))]


def load_questions(directory: Path = QUESTIONS_DIR) -> list[Question]:
    return [q for book in load_books(directory) for q in book.questions]


def load_hints(name: str, directory: Path = HINTS_DIR) -> dict[str, str]:
    """The hint set `name` ("none": no passage), each question's hypothetical passage by question text."""
    if name == "none":
        return {}
    hints: dict[str, str] = {}
    for path in sorted(directory.glob(f"{name}*.yaml")):
        hints.update((entry["question"], entry["passage"]) for entry in yaml.safe_load(path.read_text(encoding="utf-8")))
    if not hints:
        raise FileNotFoundError(f"no hint set {name!r} under {directory} (expected {name}*.yaml)")
    return hints


@dataclass(frozen=True)
class OffTopic:
    """A question no book of the set answers, with the passage an LLM might invent for it; `kind` says how far it
    is from the books (OFF_TOPIC_KINDS)."""

    question: str
    passage: str
    kind: str
    language: str


def load_off_topic(directory: Path = OFF_TOPIC_DIR) -> list[OffTopic]:
    """The off-topic questions, every language's file."""
    asked = []
    for path in sorted(directory.glob("*.yaml")):
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in content["questions"]:
            if entry["kind"] not in OFF_TOPIC_KINDS:
                raise ValueError(f"{path.name}: {entry['question']!r} has kind {entry['kind']!r}; "
                                 f"one of {', '.join(OFF_TOPIC_KINDS)}")
            asked.append(OffTopic(entry["question"], entry["passage"], entry["kind"], content["language"]))
    return asked


def distinct_questions(questions: list[str], count: int, skip: int = 0) -> list[str]:
    """`count` different question texts, after the first `skip` (every question, then every wording)."""
    wordings = [wording.format(question) for wording in QUESTION_WORDINGS for question in questions]
    if skip + count > len(wordings):
        raise SystemExit(f"only {len(wordings)} distinct questions; ask for fewer (--queries)")
    return wordings[skip : skip + count]


def normalise(text: str) -> str:
    """Case and spacing aside: what 'the phrase appears in the text' compares."""
    return " ".join(text.casefold().replace("’", "'").split())


def contains_phrase(text: str, phrase: str) -> bool:
    return normalise(phrase) in normalise(text)


def book_file(corpus: Path, book: int | str) -> Path:
    """The file a book is read from: Calibre's EPUB (else PDF), a loose local file, or one of the project's."""
    if isinstance(book, str):
        return ROOT / book if book.startswith(PROJECT_BOOKS) else corpus / "local-files" / book
    for folder in sorted((corpus / "calibre-library").glob(f"*/* ({book})")):
        for suffix in FORMAT_PREFERENCE:
            found = sorted(folder.glob(f"*{suffix}"))
            if found:
                return found[0]
    raise FileNotFoundError(f"no EPUB or PDF of Calibre book {book} under {corpus / 'calibre-library'}")


@cache
def extracted(path: Path) -> ExtractedBook:
    """The book as ingest extracts it."""
    from services.ingest.extract import extract_book

    return extract_book(path)


def book_text(path: Path) -> str:
    """The book's text as ingest extracts it (chunks are cut from it), normalised."""
    return normalise("\n".join(chapter.text for chapter in extracted(path).chapters))


def text_words(text: str) -> list[str]:
    """The words of `text`, casefolded; in Japanese, runs of one script (see the module's docstring)."""
    found = []
    for word in _WORD.findall(text.casefold().replace("’", "'")):
        found.extend(_SCRIPT_RUN.findall(word) if _UNSPACED.search(word) else [word])
    return found


def content_words(text: str, language: str = "en") -> list[str]:
    stop_words = STOP_WORDS | LANGUAGE_STOP_WORDS.get(language, frozenset())
    return [w for w in text_words(text) if w not in stop_words and not _HIRAGANA_RUN.fullmatch(w)]


def phrase_too_short(phrase: str) -> str | None:
    """Why `phrase` is too short to point at one passage, None when it is long enough."""
    if _UNSPACED.search(phrase):
        if len("".join(phrase.split())) < MIN_PHRASE_CHARS:
            return f"has fewer than {MIN_PHRASE_CHARS} characters"
    elif len(phrase.split()) < MIN_PHRASE_WORDS:
        return f"has fewer than {MIN_PHRASE_WORDS} words"
    return None


def runs(words: Sequence[str], length: int = RUN_WORDS) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + length]) for i in range(len(words) - length + 1)}


def problems(question: Question, text: str) -> Iterable[str]:
    """What makes `question` unsound against its book's normalised `text` (nothing when it is sound)."""
    phrase = normalise(question.phrase)
    too_short = phrase_too_short(phrase)
    if too_short:
        yield f"phrase {question.phrase!r} {too_short}"
    count = text.count(phrase)
    if count != 1:
        yield f"phrase {question.phrase!r} occurs {count} times in the book (must be exactly once)"
        return
    at = text.index(phrase)
    passage = text[max(0, at - PASSAGE_MARGIN_CHARS) : at + len(phrase) + PASSAGE_MARGIN_CHARS]
    shared = runs(content_words(question.question, question.language)) & runs(content_words(passage, question.language))
    if shared:
        yield f"question {question.question!r} shares {sorted(' '.join(r) for r in shared)} with its passage"


def held_out(title: str) -> bool:
    return any(name in title.casefold() for name in HELD_OUT_TITLES)


def check_files(paths: Sequence[Path], corpus: Path = DEFAULT_CORPUS) -> list[str]:
    found: list[str] = []
    for path in paths:
        book = load_book(path)
        if held_out(book.title):
            found.append(f"{path.name}: {book.title} is held out for unseen checks")
        source = book_file(corpus, book.book)
        recorded = extracted(source).language
        if recorded and recorded.split("-")[0].casefold() != book.language:
            found.append(f"{path.name}: {source.name} records language {recorded!r}, not {book.language!r}")
        text = book_text(source)
        seen: set[str] = set()
        for q in book.questions:
            if q.question in seen:
                found.append(f"{path.name}: question {q.question!r} is asked twice")
            seen.add(q.question)
            found.extend(f"{path.name}: {p}" for p in problems(q, text))
    return found


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, help="question files (default: every one)")
    paths = parser.parse_args(argv).files or sorted(QUESTIONS_DIR.glob("*.yaml"))
    found = check_files(paths)
    for line in found:
        print(line)
    count = sum(len(load_book(p).questions) for p in paths)
    print(f"{count} questions in {len(paths)} file(s); {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
