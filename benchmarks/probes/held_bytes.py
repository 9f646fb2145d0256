"""Probe: the state bytes one stream holds after typing a short and a long text, unbounded and with
`max_checkpoints=4`, for a saved student in fp32 and int8 (`BatchStreamingEncoder.nbytes`: the current state plus
the checkpoints that make deletes pops). Run with PYTHONPATH pointing at another checkout's `src` to compare
commits. A probe for deciding, not a benchmark figure (`benchmarks/run.py` reports the short text's bytes).

    python benchmarks/probes/held_bytes.py outputs/shape-l1 --output benchmarks/probes/results/held-bytes.json
"""

import argparse
import json
import sys
from pathlib import Path

from transformers import AutoTokenizer

import tf2rnn_hf
from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.quantization import quantize_int8

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from run import CAPPED_CHECKPOINTS, held_bytes  # noqa: E402

SHORT = "a few words typed so far in this session and a partial wo"  # benchmarks/run.py's (13 words)
LONG = " ".join(["a few words typed so far in this session and"] * 12) + " a partial wo"  # 111 words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    model = TF2RNNModel.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows = {}
    for precision, student in (("fp32", model), ("int8", quantize_int8(model))):
        for label, text in (("13 words", SHORT), ("111 words", LONG)):
            rows[f"{precision}, {label}"] = {
                "unbounded": held_bytes(student, tokenizer, text),
                f"max_checkpoints={CAPPED_CHECKPOINTS}": held_bytes(student, tokenizer, text, CAPPED_CHECKPOINTS)}
            print(precision, label, rows[f"{precision}, {label}"])
    out = {"model": args.model, "package": str(Path(tf2rnn_hf.__file__).parent), "state_bytes": model.init_state(1).nbytes(),
           "rows": rows}
    Path(args.output).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
