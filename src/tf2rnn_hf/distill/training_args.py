"""`DistillationTrainingArguments`: every option of the distillation trainer, recorded in its checkpoints
beside the `TrainingArguments` it extends (as sentence-transformers' `SentenceTransformerTrainingArguments`)."""

from dataclasses import dataclass, field
from typing import List, Optional

from transformers import TrainingArguments

from .losses import DISTANCES, LossSchedule


@dataclass
class DistillationTrainingArguments(TrainingArguments):
    """`TrainingArguments` plus the loss schedule and the losses' options.

    The bare default is rollout alone, the one loss every cell supports; the presets use the schedule that
    measured best at equal CPU time (transition for the first 30%, annealed into rollout over the next 20%).
    With `train_minutes`, progress is elapsed time: the schedule and the learning-rate decay follow the
    clock and training stops when it runs out, so runs compare at equal CPU time; the progress bar shows
    the budget's elapsed and remaining time, steps and samples/s (`TimeBudgetProgressCallback`).
    """

    # The collators read the trajectory columns, which the model's forward does not name.
    remove_unused_columns: bool = field(default=False, metadata={"help": "Keep every dataset column (the "
                                                                          "collators need the trajectories)."})
    transition_until: float = field(default=0.0, metadata={"help": "Fraction of training on the transition loss."})
    anneal: float = field(default=0.0, metadata={"help": "Fraction over which transition anneals into rollout."})
    restart_prob: float = field(default=0.0, metadata={"help": "Scheduled sampling: teacher restarts per step."})
    similarity_weight: float = field(default=0.0, metadata={"help": "Weight of the in-batch similarity loss."})
    neighbour_weight: float = field(default=0.0, metadata={
        "help": "Weight of the neighbour loss: the student's similarities to a bank of teacher embeddings of "
                "training texts, matched to the teacher's (softmax KL)."})
    neighbour_bank: int = field(default=8192, metadata={"help": "Training texts in the neighbour loss's bank."})
    neighbour_temperature: float = 0.05
    keystroke_weight: float = field(default=0.0, metadata={
        "help": "Weight of the streaming-path loss on keystrokes inside a word (needs --prefix_unit char)."})
    partials_per_text: int = field(default=4, metadata={"help": "Keystrokes inside a word sampled per text."})
    distance: str = field(default="cosine", metadata={"help": f"Per-position distance: {', '.join(DISTANCES)}."})
    final_weight: float = field(default=1.0, metadata={"help": "Weight of each text's last step in the losses."})
    open_middle_fraction: float = field(default=1.0, metadata={
        "help": "Share of the targets inside an open-token block that the free-running loss keeps (drawn per "
                "batch, weighted up by its inverse): each costs its block's first tokens again."})
    tbptt: Optional[int] = field(default=None, metadata={"help": "Truncate backprop every this many steps."})
    tail_weight: float = field(default=1.0, metadata={
        "help": "A student with --tail_layers: weight of the loss on its second embedding (the current word through "
                "the lower layers only) beside the free-running loss."})
    freeze_embeddings: bool = field(default=False, metadata={
        "help": "Keep the token table fixed (an inherited student's is the teacher's): half of its parameters "
                "left out of the gradient and the optimizer (20 minutes: 2.09 epochs against 2.00, equal fidelity)."})
    sparse_embeddings: bool = field(default=False, metadata={
        "help": "Train the token table row-sparse: its gradient holds only the rows a batch reads, and AdamW "
                "moves only those rows (RowSparseAdamW, lazy Adam). A dense update of its 11.7M parameters is a "
                "third of a one-layer student's bf16 CPU step. Across processes (DDP) the gradient crosses dense and "
                "the rows it holds nonzero, those some process read, are updated."})
    weight_bits: Optional[int] = field(default=None, metadata={
        "help": "Quantisation-aware training: every linear weight but the readout's runs rounded to symmetric int-N "
                "per row (4 for an int4 kernel), the gradient passing to the unrounded weight; the student is saved "
                "rounded (quantization_aware.py)."})
    weight_group: Optional[int] = field(default=None, metadata={
        "help": "With --weight_bits: one scale per this many columns of a row (default: one per row). The fused step "
                "reads int4 weights with one scale a row or one per 128 columns; smaller groups it reads as int8."})
    weight_keep: List[str] = field(default_factory=list, metadata={
        "help": "With --weight_bits: linear layers left unrounded, as the readout is, by their name's last part "
                "(query, key, value, out, up, down) or a module's name (cell.layers.2: all of that layer's, "
                "cell.layers.2.up: one); the fused step reads them as int8, the rest as int4, layer by layer (with "
                "--tail_layers, keeping the word's layers reads a keystroke's as int4 and a word's end as int8). The "
                "step reads query, key and value as one product: keep all three or none."})
    weight_scale: str = field(default="max", metadata={
        "help": "With --weight_bits: each scale spans its row's largest value ('max'), or is learned ('learned', LSQ: "
                "started at the least-squares clip, the clipped values getting no gradient)."})
    parent_weight: float = field(default=0.0, metadata={
        "help": "With --init_from: the free-running loss's targets moved this share of the way from the teacher's "
                "trajectory to the one the student it continues computes (frozen), e.g. for a --weight_bits stage: the "
                "rounded student is pulled to what its unrounded parent reached, not only to the teacher (measured on "
                "a six-layer int4 stage: no gain; docs/experiments.md, session 73)."})
    train_minutes: Optional[float] = field(default=None, metadata={
        "help": "Train for this long (wall clock); the loss schedule and learning rate follow the clock."})

    def __post_init__(self):
        if self.distance not in DISTANCES:
            raise ValueError(f"Unknown distance {self.distance!r}; choose one of {', '.join(DISTANCES)}.")
        if self.sparse_embeddings and self.freeze_embeddings:
            raise ValueError("sparse_embeddings and freeze_embeddings both set: a frozen token table has no update.")
        if self.sparse_embeddings and self.fp16:
            raise ValueError("sparse_embeddings does not support fp16 (its gradient scaler has no sparse path); "
                             "use bf16 or fp32.")
        if self.weight_group is not None and self.weight_bits is None:
            raise ValueError("weight_group sets the columns per scale of --weight_bits; pass --weight_bits too.")
        if self.weight_keep and self.weight_bits is None:
            raise ValueError("weight_keep names the layers --weight_bits leaves unrounded; pass --weight_bits too.")
        if self.weight_keep and 0 < len(set(self.weight_keep) & {"query", "key", "value"}) < 3:
            raise ValueError(f"weight_keep {self.weight_keep} keeps part of query, key and value, which the fused step "
                             "reads as one product: its int4 form needs all three rounded. Keep all three or none.")
        if self.weight_scale not in ("max", "learned"):
            raise ValueError(f"weight_scale is 'max' or 'learned', got {self.weight_scale!r}.")
        if self.weight_scale != "max" and self.weight_bits is None:
            raise ValueError("weight_scale sets how --weight_bits scales its rows; pass --weight_bits too.")
        if self.weight_bits is not None and not 2 <= self.weight_bits <= 8:
            raise ValueError(f"weight_bits rounds to 2..8-bit integers, got {self.weight_bits}.")
        if not 0 <= self.parent_weight <= 1:
            raise ValueError(f"parent_weight is a share of the targets, in [0, 1]; got {self.parent_weight}.")
        if self.train_minutes:
            self.max_steps = 10 ** 9  # the clock stops training, not a step count
        super().__post_init__()

    @property
    def schedule(self) -> LossSchedule:
        """The loss weights over training progress."""
        return LossSchedule(self.transition_until, self.anneal, self.restart_prob, self.similarity_weight,
                            self.keystroke_weight, self.neighbour_weight)
