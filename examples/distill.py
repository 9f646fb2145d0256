#!/usr/bin/env python
"""Distil a recurrent student from a transformer sentence encoder.

    python examples/distill.py --preset quick
    accelerate launch examples/distill.py --preset quick
    accelerate launch --multi_gpu --num_processes 2 examples/distill.py --preset tiny   # two CPU processes

Every option: `python examples/distill.py --help` (model, data, distillation and TrainingArguments).
"""

from tf2rnn_hf.distill.recipe import main

if __name__ == "__main__":
    main()
