"""What the teacher's trajectories cost, shard by shard: each cached shard of a run with its texts, prefixes,
seconds and finishing time (UTC), so shards that overlapped other work can be told apart from clean ones.

    python benchmarks/quality/shard_times.py ~/.cache/tf2rnn_hf/trajectories/token-*/runs/<run>.json > out.json
"""

import argparse
import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

from tf2rnn_hf.data.trajectories import _shard_dirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run manifest: <cache>/trajectories/<settings>/runs/<key>.json")
    run = parser.parse_args().run
    shards = []
    for folder in _shard_dirs(run):
        stats_file = folder / "stats.json"
        stats = json.loads(stats_file.read_text())
        finished = datetime.fromtimestamp(stats_file.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        shards.append({"finished": finished, **{k: stats[k] for k in ("texts", "prefixes", "seconds")}})
    per_text = [s["seconds"] / s["texts"] for s in shards if s["texts"]]
    print(json.dumps({"run": run.name, "texts": sum(s["texts"] for s in shards),
                      "seconds": round(sum(s["seconds"] for s in shards), 1),
                      "median_seconds_per_1000_texts": round(1000 * statistics.median(per_text), 1),
                      "shards": shards}, indent=1))


if __name__ == "__main__":
    main()
