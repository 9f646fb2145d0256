"""Trajectory fidelity: cosine between student and teacher embeddings of the same texts (or prefixes)."""

import datasets
import evaluate
import numpy as np

import tf2rnn_hf.evaluation.scores

_DESCRIPTION = """Mean cosine between matching rows of predicted (student) and reference (teacher) embeddings.
Each row may be one vector or a whole trajectory [steps, dim]: final_cosine reads the last vector of each,
prefix_cosine all of them."""

_KWARGS_DESCRIPTION = """
Args:
    predictions: student embeddings, one vector (or one [steps, dim] trajectory) per text.
    references: teacher embeddings of the same shape.
Returns:
    final_cosine: mean cosine of the last vectors; prefix_cosine: mean over all vectors.
Examples:
    >>> metric = evaluate.load("src/tf2rnn_hf/evaluation/metrics/trajectory_fidelity")
    >>> metric.compute(predictions=[[1.0, 0.0]], references=[[1.0, 0.0]])
    {'final_cosine': 1.0, 'prefix_cosine': 1.0}
"""


class TrajectoryFidelity(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation="", inputs_description=_KWARGS_DESCRIPTION,
            features=[datasets.Features({"predictions": datasets.Sequence(datasets.Value("float32")),
                                         "references": datasets.Sequence(datasets.Value("float32"))}),
                      datasets.Features({"predictions": datasets.Array2D((None, None), "float32"),
                                         "references": datasets.Array2D((None, None), "float32")})])

    def _compute(self, predictions, references):
        finals, prefixes = [], []
        for p, r in zip(predictions, references):
            p, r = np.atleast_2d(np.asarray(p, dtype=np.float32)), np.atleast_2d(np.asarray(r, dtype=np.float32))
            cos = tf2rnn_hf.evaluation.scores.cosine_fidelity(p, r)
            finals.append(float(cos[-1]))
            prefixes.extend(cos.tolist())
        return {"final_cosine": float(np.mean(finals)), "prefix_cosine": float(np.mean(prefixes))}
