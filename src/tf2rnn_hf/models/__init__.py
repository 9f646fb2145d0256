"""Model definitions: what a saved student needs at load time, and nothing of training."""

from .tf2rnn import CELL_TYPES, TF2RNNConfig, TF2RNNModel, TF2RNNModelOutput, TF2RNNPreTrainedModel, TF2RNNState

__all__ = ["CELL_TYPES", "TF2RNNConfig", "TF2RNNModel", "TF2RNNModelOutput", "TF2RNNPreTrainedModel", "TF2RNNState"]
