"""The TF2RNN model: configuration, cells and modeling. These three files are also the Hub's custom code
(`trust_remote_code`): they import only torch, transformers and each other."""

from .configuration_tf2rnn import CELL_TYPES, TF2RNNConfig
from .modeling_tf2rnn import TF2RNNModel, TF2RNNModelOutput, TF2RNNPreTrainedModel, TF2RNNState

__all__ = ["CELL_TYPES", "TF2RNNConfig", "TF2RNNModel", "TF2RNNModelOutput", "TF2RNNPreTrainedModel", "TF2RNNState"]
