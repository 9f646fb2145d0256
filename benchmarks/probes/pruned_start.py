"""Probe: what a narrower feed-forward costs before any training. The inherited student built with each
`intermediate_size` (its neurons chosen and refitted on the corpus's first 512 training texts; a distillation run
uses the first 512 of the texts it draws), its final cosine to the teacher on the first held-out texts. A probe for
choosing rows, not a benchmark figure.

    python benchmarks/probes/pruned_start.py [--sizes 1536,1024,768,512,384] [--texts 300]
"""

import argparse

import torch
import torch.nn.functional as F

from tf2rnn_hf.data.corpus import load_texts
from tf2rnn_hf.data.teacher import Teacher
from tf2rnn_hf.distill import build_student
from tf2rnn_hf.distill.recipe import CALIBRATION_TEXTS
from tf2rnn_hf.evaluation.suites import student_encoder, teacher_encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1536,1024,768,512,384")
    parser.add_argument("--texts", type=int, default=300)
    args = parser.parse_args()
    teacher = Teacher()
    calibration = list(load_texts("offline", "train", limit=CALIBRATION_TEXTS)["text"])
    held_out = list(load_texts("offline", "heldout", limit=args.texts)["text"])
    reference = teacher_encoder(teacher)(held_out)
    for size in map(int, args.sizes.split(",")):
        full = size == teacher.model.config.intermediate_size
        model, tokenizer = build_student(teacher, cell_type="tova_attention", num_slots=128, intermediate_size=size,
                                         calibration_texts=None if full else calibration)
        with torch.no_grad():
            cosine = F.cosine_similarity(student_encoder(model.eval(), tokenizer)(held_out), reference).mean()
        print(f"intermediate_size {size}: untrained final cosine {cosine:.4f}", flush=True)


if __name__ == "__main__":
    main()
