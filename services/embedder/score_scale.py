"""What a model's similarities mean: the scale the query service scores passages on (ranking.ScoreScale).

Two numbers a model: its similarity floor, the mean cosine it gives a question and a passage on unrelated subjects
(the PROBE pairs, measured at start-up), where relevance starts; and its relevance at half, the relevance (in
ranking.py's terms) that scores 0.5.

A profile's model has its relevance at half fitted on the retrieval bench (bench/calibration.py --fit: the highest
that costs the tuning half no answer in its top five, with the LLM's passages or without). Any other model, one
named by its hub id, measures its own on the probe: SPREAD_AT_HALF standard deviations of the unrelated pairs above
their mean, which is where MiniLM's fitted value lies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alexandria.relevance import RELEVANCE_AT_HALF, SEMANTIC_WEIGHT
from services.embedder.profiles import E5_FOLDER, MINILM_NAME, MPNET_FOLDER, recorded_base_name

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
# MiniLM's probe: floor 0.012, spread 0.0884, so 0.9 x 4.0 x 0.0884 / 0.988 = 0.322; fitted, 0.32.
SPREAD_AT_HALF = 4.0
# Each profile's model by the name it records, less its backend's suffix. bench/calibration.py --fit, 2026-11-29:
# MiniLM's fit is 0.35 on the tuning half, but that costs the check half answers (with the LLM's passages 0.984 ->
# 0.967), so it keeps 0.32, its first calibration; multilingual-e5's is 0.325 (its probe would say 0.38, which
# costs a tenth of the answers found with a passage). mpnet's fit is 0.26 (English only), but from 0.26 to 0.36 it
# finds the same answers on the check half and the widened set, and at 0.32 it answers one English off-topic
# question fewer, so it keeps 0.32.
FITTED_RELEVANCE_AT_HALF: dict[str, float] = {
    MINILM_NAME: RELEVANCE_AT_HALF,
    MPNET_FOLDER: RELEVANCE_AT_HALF,
    E5_FOLDER: 0.325,
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

    @property
    def estimated_relevance_at_half(self) -> float:
        """SPREAD_AT_HALF standard deviations of unrelated pairs above their mean, as a hybrid relevance."""
        return SEMANTIC_WEIGHT * SPREAD_AT_HALF * self.spread / (1.0 - self.floor)


def relevance_at_half(model_name: str, probed: ProbedSimilarity) -> float:
    """The fitted value for a profile's model (by its recorded name, whatever its backend), else the probe's."""
    return FITTED_RELEVANCE_AT_HALF.get(recorded_base_name(model_name)) or probed.estimated_relevance_at_half
