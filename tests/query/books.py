"""A few real paragraphs, written as ingest writes them (schema.py payload, BookWriter), for integration tests.

Children are the paragraphs with whitespace collapsed (as ingest sends sentences to the model);
each chapter's parent holds the chapter's original text, hard line breaks included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from alexandria.clients import EmbedderClient
from alexandria.store import StoredPoint
from alexandria.store import schema as f
from alexandria.store.lexical import encode_document
from services.ingest.documents import window_header
from services.ingest.writer import point_id


@dataclass(frozen=True)
class SampleBook:
    book_key: str
    title: str
    authors: tuple[str, ...]
    calibre_id: int | None
    chapters: tuple[tuple[str, tuple[str, ...]], ...]  # (title, paragraphs)
    hierarchical: bool = True
    language: str = "eng"


PRIDE = SampleBook(
    book_key="uuid-pride",
    title="Pride and Prejudice",
    authors=("Jane Austen",),
    calibre_id=1,
    chapters=(
        ("Chapter 1", (
            ("It is a truth universally acknowledged, that a single man in possession of a good fortune,\n"
             "must be in want of a wife."),
            ("“My dear Mr. Bennet,” said his lady to him one day, “have you heard that Netherfield Park is\n"
             "let at last?” Mr. Bennet replied that he had not."),
            ("“Why, my dear, you must know, Mrs. Long says that Netherfield is taken by a young man of large\n"
             "fortune from the north of England; that he came down on Monday in a chaise and four to see the place.”"),
            ("“What is his name?” “Bingley.” “Is he married or single?” “Oh! Single, my dear, to be sure! A single\n"
             "man of large fortune; four or five thousand a year. What a fine thing for our girls!”"),
            ("Mr. Bennet was so odd a mixture of quick parts, sarcastic humour, reserve, and caprice, that the\n"
             "experience of three-and-twenty years had been insufficient to make his wife understand his character."),
        )),
        ("Chapter 43", (
            ("Elizabeth, as they drove along, watched for the first appearance of Pemberley Woods with some\n"
             "perturbation; and when at length they turned in at the lodge, her spirits were in a high flutter."),
            ("The park was very large, and contained great variety of ground. They entered it in one of its\n"
             "lowest points, and drove for some time through a beautiful wood stretching over a wide extent."),
            ("Elizabeth was delighted. She had never seen a place for which nature had done more, or where\n"
             "natural beauty had been so little counteracted by an awkward taste. At that moment she felt that\n"
             "to be mistress of Pemberley might be something!"),
        )),
    ),
)

EMMA = SampleBook(
    book_key="uuid-emma",
    title="Emma",
    authors=("Jane Austen",),
    calibre_id=2,
    hierarchical=False,
    chapters=(
        ("CHAPTER I", (
            ("Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition, seemed\n"
             "to unite some of the best blessings of existence; and had lived nearly twenty-one years in the world\n"
             "with very little to distress or vex her."),
            ("Mr. Knightley, a sensible man about seven or eight-and-thirty, was not only a very old and intimate\n"
             "friend of the family, but particularly connected with it, as the elder brother of Isabella's husband."),
        )),
    ),
)

# A book whose ingest has not finished: it mentions Netherfield and Pemberley but must stay invisible.
UNFINISHED = SampleBook(
    book_key="uuid-unfinished",
    title="Netherfield Revisited",
    authors=("Anonymous",),
    calibre_id=9,
    chapters=(("Chapter 1", ("Netherfield and Pemberley were both let at last, and everyone was delighted.",)),),
)


SENTENCE_END = re.compile(r"(?<=[.!?”])\s+")


def collapse(text: str) -> str:
    return " ".join(text.split())


async def book_points(book: SampleBook, embedder: EmbedderClient, model: str, complete: bool = True) -> list[StoredPoint]:
    """Every point of `book` with real vectors from the embedder and the payload ingest writes."""
    base = {
        f.BOOK_KEY: book.book_key,
        f.BOOK_TITLE: book.title,
        f.AUTHOR: " & ".join(book.authors),
        f.AUTHORS: list(book.authors),
        f.LANGUAGE: book.language,
        f.FILE_PATH: f"/library/{book.title}.epub",
        f.FORMAT: "EPUB",
        f.MODEL: model,
        f.COMPLETE: complete,
        f.VERSION: 0,
        **({f.CALIBRE_ID: book.calibre_id} if book.calibre_id is not None else {}),
    }
    payloads: list[tuple[str, dict]] = []
    position = 0
    for chapter_index, (title, paragraphs) in enumerate(book.chapters):
        chapter_text = "\n\n".join(paragraphs)
        parent_id = point_id(book.book_key, 0, f.Level.PARENT, chapter_index)
        location = {f.CHAPTER_TITLE: title, f.CHAPTER_INDEX: chapter_index}
        if book.hierarchical:
            payloads.append((parent_id, {
                **base, **location, f.TEXT: chapter_text, f.LEVEL: f.Level.PARENT.value, f.POSITION: chapter_index,
                f.WORD_COUNT: len(chapter_text.split()),
            }))
        for sequence_index, paragraph in enumerate(paragraphs):
            level = f.Level.CHILD if book.hierarchical else f.Level.FLAT
            payload = {
                **base, **location, f.TEXT: collapse(paragraph), f.LEVEL: level.value, f.POSITION: position,
                f.SEQUENCE_INDEX: sequence_index, f.SIBLING_COUNT: len(paragraphs),
                f.WORD_COUNT: len(paragraph.split()),
            }
            if book.hierarchical:
                payload[f.PARENT_ID] = parent_id
            payloads.append((point_id(book.book_key, 0, level, position), payload))
            position += 1
    # As ingest writes them: a chunk carries the normalised mean of its sentences' vectors and its window
    # vectors; a chapter, one vector of its text.
    split = [
        [s for s in SENTENCE_END.split(p[f.TEXT]) if s] if p[f.LEVEL] != f.Level.PARENT else [p[f.TEXT]]
        for _, p in payloads
    ]
    vectors = (await embedder.embed_many([s for sentences in split for s in sentences])).vectors
    chunks = [p for _, p in payloads if p[f.LEVEL] != f.Level.PARENT]
    windows = iter(await embedder.embed_windows(
        [(window_header(p[f.BOOK_TITLE], p[f.CHAPTER_TITLE]), p[f.TEXT]) for p in chunks]))
    points, start = [], 0
    for (point, payload), sentences in zip(payloads, split, strict=True):
        rows = vectors[start : start + len(sentences)]
        start += len(sentences)
        mean = rows.mean(axis=0)
        multivector = next(windows) if payload[f.LEVEL] != f.Level.PARENT else None
        points.append(StoredPoint(point, mean / np.linalg.norm(mean), encode_document(payload[f.TEXT]), payload,
                                  multivector))
    return points
