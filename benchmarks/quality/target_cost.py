"""What the teacher's trajectory pass costs per target layout, side by side on the same texts: every prefix,
`--stride N`, and `--stride N --dense_prefixes K` (every prefix up to K tokens kept). One shard each, computed in
memory (no cache read or written), so each layout pays the full teacher pass.

    python benchmarks/quality/target_cost.py --texts 2000 --output benchmarks/quality/results/target-cost.json
"""

import argparse
import json
import time

from tf2rnn_hf.data import trajectories
from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher

LAYOUTS = ((1, 0), (2, 0), (3, 0), (3, 4), (3, 8))  # (stride, dense_prefixes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000, help="the seeded draw's first texts (as the rows use)")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    texts = list(load_texts("offline", "train", "text", args.texts, None, shuffle_seed=0)["text"])
    teacher = Teacher("built-in")
    rows = {}
    for stride, dense in LAYOUTS:
        settings = trajectories.TrajectorySettings(stride=stride, dense_prefixes=dense)  # fp32, as the teacher is
        start = time.perf_counter()
        _, stats = trajectories.compute_shard(texts, teacher, settings)
        seconds = time.perf_counter() - start
        rows[f"stride {stride}, dense {dense}"] = {
            "seconds_per_1000_texts": round(1000 * seconds / len(texts), 2),
            "teacher_calls_per_text": round(stats["teacher_calls"] / len(texts), 2),
            "targets_per_text": round(stats["prefixes"] / len(texts), 2)}
        print(rows[f"stride {stride}, dense {dense}"], stride, dense, flush=True)
    with open(args.output, "w") as f:
        json.dump({"texts": len(texts), "layouts": rows}, f, indent=1)


if __name__ == "__main__":
    main()
