"""The one lexical (BM25-style) encoder: ingest encodes chunks with it, query encodes questions.

Both sides must tokenise identically or lexical search silently finds nothing, so this
module is the only place the configuration lives. The encoder is qdrant-edge's `Bm25`
(pure Rust, no model files, works offline, deterministic: token ids are hashes, stable
across processes and machines). Documents get BM25 term-frequency weights; queries get
weight 1 per distinct token; the collection's IDF modifier supplies the inverse document
frequency at query time, so no corpus statistics are kept here.

The configuration is language-neutral on purpose, because a personal library mixes
languages and a question's language is not known before it is encoded:
- multilingual tokenizer: splits on words like the plain one for Latin, Cyrillic, Greek…
  text, and also segments Chinese/Japanese/Thai, which have no spaces;
- lowercase and ASCII folding: "Čovjek", "covjek" and "ČOVJEK" are one token, and a user
  typing without diacritics still matches;
- no stemming: a Snowball stemmer is per language (there is none for Croatian), and an
  English one would mangle every other language; exact word forms are what lexical
  search adds next to the dense vectors anyway (names, rare terms, codes);
- no stopwords: any stopword list is one language's, and would drop real words of
  another (German "die", English "die"); the IDF modifier already makes frequent words
  weigh almost nothing.
"""

from __future__ import annotations

import qdrant_edge

from alexandria.store.model import SparseVector

# Default BM25 saturation and length normalisation; the average length sits between a
# semantic chunk and a chapter, the two kinds of text that get encoded.
_CONFIG = qdrant_edge.Bm25Config(
    k=1.2,
    b=0.75,
    avg_len=256.0,
    tokenizer=qdrant_edge.TokenizerType.Multilingual,
    lowercase=True,
    ascii_folding=True,
    stopwords=qdrant_edge.StopwordsSet(custom=set()),
    stemmer=qdrant_edge.DisabledStemmer(),
    max_token_len=40,  # longer "words" are URLs, base64 or OCR debris, never typed in a question
)
_ENCODER = qdrant_edge.Bm25(_CONFIG)


def encode_document(text: str) -> SparseVector:
    """Sparse vector of a stored text: hashed token ids with BM25 term-frequency weights."""
    return _to_model(_ENCODER.embed_document(text))


def encode_query(text: str) -> SparseVector:
    """Sparse vector of a question: weight 1 for each distinct token (empty when it has no words)."""
    return _to_model(_ENCODER.embed_query(text))


def _to_model(vector: qdrant_edge.SparseVector) -> SparseVector:
    return SparseVector(indices=list(vector.indices), values=list(vector.values))
