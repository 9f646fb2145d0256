"""tf2rnn_hf: distil transformer sentence encoders into recurrent encoders that update in O(1) per step.

Importing the package registers the model with `AutoConfig`/`AutoModel`, so checkpoints load without
`trust_remote_code`. The subpackages are the stages, each importing only from those before it:
`models` -> `inference` -> `data` -> `evaluation` -> `hub` -> `distill` -> `cli`.
"""

from transformers import AutoConfig, AutoModel

from .models import CELL_TYPES, TF2RNNConfig, TF2RNNModel, TF2RNNModelOutput, TF2RNNPreTrainedModel, TF2RNNState

__version__ = "0.1.0"

AutoConfig.register(TF2RNNConfig.model_type, TF2RNNConfig, exist_ok=True)
AutoModel.register(TF2RNNConfig, TF2RNNModel, exist_ok=True)

__all__ = [
    "CELL_TYPES",
    "TF2RNNConfig",
    "TF2RNNModel",
    "TF2RNNModelOutput",
    "TF2RNNPreTrainedModel",
    "TF2RNNState",
    "__version__",
]
