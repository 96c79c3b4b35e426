"""What the query service and the embedder agree on about a passage's relevance: services/query/ranking.py
computes it, services/embedder/score_scale.py says, for each model, which relevance scores 0.5."""

# Tuned on the tuning half of bench/retrieval.py with the default model (recall@5 / recall@10 / MRR@10
# over semantic weights 0.5-1.0): 0.7 gave 0.45 / 0.54 / 0.362, 0.8 0.45 / 0.58 / 0.360, 0.9
# 0.51 / 0.63 / 0.358, semantic alone 0.53 / 0.62 / 0.337. The lexical scale changed nothing there;
# it keeps a lone weak word match from counting as a full one.
SEMANTIC_WEIGHT = 0.9

# MiniLM's relevance at half, and the scale of a model whose embedder reports none (ScoreScale): midway between what
# the first ten off-topic questions of bench/retrieval.py get (their best candidates: 0.27 and below, but for one
# question near a book's subject at 0.42) and the least any tuning-half question's best candidate gets (0.358); the
# lowest relevance of an answer in the top five on the tuning half is 0.347, above it too.
RELEVANCE_AT_HALF = 0.32
