"""Neighbour agreement@k: how many of the teacher's top-k neighbours the student's top-k recovers."""

import datasets
import evaluate
import numpy as np

import tf2rnn_hf.evaluation.scores

_DESCRIPTION = """For each text, the fraction of its k nearest neighbours under the teacher's embeddings
(among the same texts, itself excluded) that are also among its k nearest under the student's; averaged."""

_KWARGS_DESCRIPTION = """
Args:
    predictions: student embeddings, one per text (more than k texts).
    references: teacher embeddings of the same texts.
    k: neighbours per text (default 10).
Returns:
    neighbour_agreement: a value in [0, 1].
"""


class NeighbourAgreement(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation="", inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("float32")),
                                        "references": datasets.Sequence(datasets.Value("float32"))}))

    def _compute(self, predictions, references, k=10):
        value = tf2rnn_hf.evaluation.scores.neighbour_agreement(np.asarray(predictions, dtype=np.float32),
                                                     np.asarray(references, dtype=np.float32), k=k)
        return {"neighbour_agreement": value}
