"""A passage cut into windows that each fit the model: what a passage's window vectors are embedded from.

A model reads at most `max_seq_length` of its own tokens, and a passage of the contract's chunking
(200-1,200 words) is often longer, so one vector of the whole passage never sees its end. Each window
is a run of whole words of the passage, at most the model's length with the header and the model's
special tokens counted, consecutive windows sharing about `overlap` tokens so that no sentence is only
ever seen cut in two; a window never crosses the passage. The header (the book's title and chapter)
gives each window the context a bare run of words lacks ("he" instead of the character's name, no
scene). Measured by the windows bench (bench/windows.py, in git history): see docs/retrieval.md.

The model cuts words into units and counts their tokens (`TokenizedText`); this module only groups them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TokenizedText:
    """A text as the model reads it: the character span of each word, and how many tokens each takes."""

    spans: Sequence[tuple[int, int]]
    tokens: Sequence[int]


def window_spans(tokenized: TokenizedText, budget: int, overlap: int) -> list[tuple[int, int]]:
    """(first word, end word) of each window: as many whole words as fit `budget` tokens, the next window
    starting early enough to share at least `overlap` tokens with the last one (whole words again). A
    word longer than the budget is a window of its own (the model truncates it)."""
    counts = tokenized.tokens
    windows: list[tuple[int, int]] = []
    start = 0
    while start < len(counts):
        end, used = start, 0
        while end < len(counts) and (end == start or used + counts[end] <= budget):
            used += counts[end]
            end += 1
        windows.append((start, end))
        if end == len(counts):
            break
        following, shared = end, 0
        while following - 1 > start and shared < overlap:
            following -= 1
            shared += counts[following]
        start = following
    return windows


def window_texts(header: str, text: str, tokenized: TokenizedText, budget: int, overlap: int) -> list[str]:
    """The texts the windows of `text` are embedded from: the header, then the window's words as the
    passage has them (its own spacing and punctuation). An empty text is one window: the header."""
    if not tokenized.spans:
        return [header + text]
    spans = tokenized.spans
    return [header + text[spans[first][0] : spans[end - 1][1]]
            for first, end in window_spans(tokenized, budget, overlap)]
