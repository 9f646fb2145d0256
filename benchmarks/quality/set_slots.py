"""Set a saved student's cache slot count (`num_slots`) in its config.json, the weights untouched.

`python benchmarks/quality/set_slots.py MODEL_DIR SLOTS`: what `AutoModel.from_pretrained(MODEL_DIR, num_slots=SLOTS)`
would load, saved through `TF2RNNConfig` (so the value is checked as any config's is).
"""
import sys

from tf2rnn_hf import TF2RNNConfig

model_dir, slots = sys.argv[1], int(sys.argv[2])
TF2RNNConfig.from_pretrained(model_dir, num_slots=slots).save_pretrained(model_dir)
