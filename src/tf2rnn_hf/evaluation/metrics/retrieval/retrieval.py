"""Paired retrieval: query i's right answer is document i; recall@k and mean reciprocal rank."""

import datasets
import evaluate
import numpy as np

import tf2rnn_hf.evaluation.scores

_DESCRIPTION = """Embeds nothing itself: takes query and document embeddings in matching order, ranks all
documents for each query by cosine, and reports recall@1, recall@10 and MRR (ties count for the query)."""

_KWARGS_DESCRIPTION = """
Args:
    predictions: query embeddings.
    references: document embeddings; row i is query i's answer.
Returns:
    recall@1, recall@10, mrr.
"""


class Retrieval(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation="", inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("float32")),
                                        "references": datasets.Sequence(datasets.Value("float32"))}))

    def _compute(self, predictions, references):
        return tf2rnn_hf.evaluation.scores.retrieval_scores(np.asarray(predictions, dtype=np.float32),
                                                 np.asarray(references, dtype=np.float32))
