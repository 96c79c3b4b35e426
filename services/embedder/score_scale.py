"""What a model's similarities mean: the scale the query service scores passages on (ranking.ScoreScale), so that
a score of 0.5 means the same under every model.

Two numbers a model, both measured at start-up on the PROBE pairs (questions and passages on unrelated subjects):
its similarity floor, the mean cosine it gives an unrelated pair, and its relevance at half, the relevance (in
ranking.py's terms) that scores 0.5: SPREAD_AT_HALF standard deviations of the unrelated pairs above their mean.
Models differ in both: MiniLM gives unrelated texts about 0 and spreads them widely (0.09), multilingual-e5
gives them 0.74 and packs them close (0.03), but relative to the room above its floor e5 spreads them wider, and one
relevance at half for both answered half of the off-topic questions under e5. Standardised this way, a score of
0.5 is as far above what unrelated texts get for every model, a profile's or one named by its hub id alike.

SPREAD_AT_HALF is MiniLM's calibration (bench/calibration.py --fit on the retrieval bench's tuning half: 0.5 just
under the least relevance of an answer in the top five, 0.32), expressed in its probe's spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
# ranking.SEMANTIC_WEIGHT: the semantic share of a hybrid relevance, the scale a relevance at half is on.
SEMANTIC_SHARE = 0.9
# MiniLM's probe: floor 0.012, spread 0.0884, so 0.9 x 4.0 x 0.0884 / 0.988 = 0.322; fitted, 0.320.
SPREAD_AT_HALF = 4.0


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
    def relevance_at_half(self) -> float:
        """SPREAD_AT_HALF standard deviations of unrelated pairs above their mean, as a hybrid relevance."""
        return SEMANTIC_SHARE * SPREAD_AT_HALF * self.spread / (1.0 - self.floor)
