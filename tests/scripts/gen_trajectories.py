"""Generate a trajectory cache for tests: `python gen_trajectories.py CACHE_DIR N_TEXTS [SHARD_SIZE]`.

Runs under plain python or `accelerate launch`; prints the cache folder from the main process."""

import sys

from accelerate import PartialState

from tf2rnn_hf.data import trajectories
from tf2rnn_hf.data.teacher import Teacher

TEXTS = [f"Sentence number {i} talks about {w} and other things." for i, w in enumerate(
    ["rivers", "mountains", "the sea", "old books", "cats", "a strange machine", "music", "winter"] * 40)]

if __name__ == "__main__":
    cache, n = sys.argv[1], int(sys.argv[2])
    shard = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    settings = trajectories.TrajectorySettings(shard_size=shard, bf16=False, max_tokens=16)
    state = PartialState(cpu=True)  # as trajectories.build does on a machine without GPUs
    root = trajectories.generate(TEXTS[:n], Teacher("built-in"), settings, cache, state.process_index,
                                 state.num_processes, progress=False)
    state.wait_for_everyone()
    if state.is_main_process:
        print("CACHE", root, "WORLD", state.num_processes, flush=True)
