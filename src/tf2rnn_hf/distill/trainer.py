"""`DistillationTrainer(transformers.Trainer)`: supplies the distillation loss (the schedule of
`losses/`) and fidelity metrics at evaluation; its options live in `DistillationTrainingArguments`."""

import random
import time
from typing import Dict, Optional

import datasets
import torch
from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import ProgressCallback
from transformers.trainer_pt_utils import LengthGroupedSampler

from ..evaluation.fidelity import fidelity, rows_to_tensors, student_trajectories
from .losses import KeystrokeLoss, NeighbourLoss, RolloutLoss, SimilarityLoss, TransitionLoss, teacher_bank
from .quantization_aware import has_rounded_weights, plain_state_dict, round_linear_weights
from .sparse_adamw import RowSparseAdamW, clip_grad_norm_
from .training_args import DistillationTrainingArguments


def _last_positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.sum(1) - 1).clamp(min=0)


class DistillationTrainer(Trainer):
    """A `Trainer` whose loss is the distillation schedule (`DistillationTrainingArguments`), and whose
    evaluation adds fidelity metrics (final and all-prefix cosine, free-running, neighbour agreement@10 and
    drift on the eval split), computed by `evaluation.fidelity`, the same code as `tf2rnn evaluate`.

    `parent`: a frozen student whose trajectory the free-running targets move towards in training, by
    `args.parent_weight` (self-distillation, e.g. of a rounded student from the unrounded one it started as)."""

    def __init__(self, *args, parent: Optional[torch.nn.Module] = None, **kwargs):
        args_, data = kwargs.get("args"), kwargs.get("train_dataset")
        if args_ is not None and not isinstance(args_, DistillationTrainingArguments):
            raise TypeError("DistillationTrainer takes DistillationTrainingArguments (TrainingArguments plus the "
                            f"loss schedule), got {type(args_).__name__}.")
        if (args_ is not None and args_.train_sampling_strategy == "group_by_length" and hasattr(data, "add_column")
                and args_.length_column_name not in data.column_names):
            # Batches of like lengths (sentences apart from passages) pad less. Without a length column the
            # Trainer would decode every row, trajectories included, to learn its length.
            kwargs["train_dataset"] = data = data.add_column(args_.length_column_name,
                                                             [len(ids) for ids in data["input_ids"]])
        if isinstance(data, datasets.Dataset) and data.format["type"] is None:
            # Rows as arrays, not Python lists: a batch's trajectories (384 floats a target) made into lists and
            # back into tensors cost twice the fetch, a fifth of a one-layer student's CPU step (train_step.py).
            kwargs["train_dataset"] = data.with_format("numpy")
        super().__init__(*args, **kwargs)
        args = self.args
        # With a time budget, progress is elapsed time (see DistillationTrainingArguments.train_minutes).
        self.time_budget = args.train_minutes * 60 if args.train_minutes else None
        self._clock_start: Optional[float] = None
        self._clock_progress = 0.0
        if self.time_budget:
            self.add_callback(_TimeBudgetCallback(self))
            # The stock bar counts steps towards max_steps (10**9 here: "1651/1000000000 [06:40<71609:24:28]").
            if self.pop_callback(ProgressCallback) is not None:
                self.add_callback(TimeBudgetProgressCallback(self))
        if args.freeze_embeddings:  # before create_optimizer, which takes only what requires grad
            self.model.get_input_embeddings().requires_grad_(False)
        if args.sparse_embeddings:
            self._use_row_sparse_embeddings()
        if args.weight_bits is not None and not has_rounded_weights(self.model):  # before the optimizer is made
            # The readout stays fp32 (int8 in the fused step): 4% of two layers' weight bytes, yet rounding it to
            # int4 after training cost 0.030 of the 0.053 final cosine the whole student lost (weight_bits.py), and
            # 0.002 when trained through (docs/experiments.md, session 55).
            round_linear_weights(self.model, args.weight_bits, args.weight_group, keep=("readout", *args.weight_keep),
                                 learned_scale=args.weight_scale == "learned")
        if (parent is None) != (args.parent_weight == 0):
            raise ValueError(f"parent_weight {args.parent_weight} with {'no' if parent is None else 'a'} parent: pass "
                             "both (the frozen student the targets move towards, and the share) or neither.")
        self.parent = None if parent is None else parent.to(args.device).eval().requires_grad_(False)
        self._final_save = False
        self.schedule = args.schedule
        self.transition = TransitionLoss(args.distance, args.final_weight)
        self.rollout = RolloutLoss(args.distance, args.final_weight, args.tbptt,
                                   getattr(self.model.config, "open_tokens", 1), args.open_middle_fraction,
                                   args.tail_weight)
        self.similarity = SimilarityLoss()
        self.keystroke = KeystrokeLoss(args.distance)
        self.neighbour = None
        if self.schedule.neighbour_weight > 0:
            if self.train_dataset is None:
                raise ValueError("The neighbour loss draws its bank from the training set: pass train_dataset.")
            self.neighbour = NeighbourLoss(teacher_bank(self.train_dataset, args.neighbour_bank, args.seed),
                                           args.neighbour_temperature)
        if self.schedule.uses_transition and getattr(self.model, "state_lift", None) is None:
            raise ValueError("The schedule uses the transition loss or restarts: build the student with "
                             "build_student(..., state_lift=True) (gru/lstm cells).")

    def _use_row_sparse_embeddings(self) -> None:
        """The token table's update made lazy (`--sparse_embeddings`). In one process `train` makes its gradient
        sparse; across processes it stays dense for DDP's all-reduce and the optimizer updates its nonzero rows."""
        table = self.model.get_input_embeddings()
        if not isinstance(table, torch.nn.Embedding):
            raise ValueError(f"sparse_embeddings needs an nn.Embedding token table, got {type(table).__name__}.")
        if self.optimizer is not None or self.optimizer_cls_and_kwargs is not None:
            raise ValueError("sparse_embeddings brings its own optimizer (RowSparseAdamW); it cannot take the one "
                             "passed to the Trainer.")
        optimizer_cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, self.model)
        if optimizer_cls is not torch.optim.AdamW:
            raise ValueError(f"sparse_embeddings updates with AdamW's arithmetic; --optim {self.args.optim} "
                             "is not AdamW (use adamw_torch or adamw_torch_fused).")
        if self.args.world_size > 1:
            # NCCL has no sparse all-reduce, and gloo's crashed a two-process CPU test once in three (SIGSEGV): the
            # table's gradient crosses dense, and the rows that come back nonzero are the rows some process read.
            kwargs = {**kwargs, "lazy_rows": [table.weight]}
        self.optimizer_cls_and_kwargs = (RowSparseAdamW, kwargs)

    def save_model(self, output_dir: Optional[str] = None, _internal_call: bool = False) -> None:
        self._final_save = not _internal_call
        try:
            super().save_model(output_dir, _internal_call)
        finally:
            self._final_save = False

    def _save(self, output_dir: Optional[str] = None, state_dict: Optional[dict] = None) -> None:
        if state_dict is None and has_rounded_weights(self.model):
            # Under --weight_bits, plain names either way: the student is saved as it ran (rounded), a checkpoint
            # with the latent weights, which the rounded modules load back when training resumes.
            state_dict = plain_state_dict(self.accelerator.unwrap_model(self.model), rounded=self._final_save)
        super()._save(output_dir, state_dict)

    def _clip_grad_norm(self, model):
        if not self.args.sparse_embeddings:
            return super()._clip_grad_norm(model)
        return clip_grad_norm_(model.parameters(), self.args.max_grad_norm)

    def _get_grad_norm(self, model, grad_norm=None):
        if grad_norm is None and self.args.sparse_embeddings:
            grad_norm = clip_grad_norm_(model.parameters(), float("inf"))
        return super()._get_grad_norm(model, grad_norm)

    def _get_train_sampler(self, *args, **kwargs):
        sampler = super()._get_train_sampler(*args, **kwargs)
        if isinstance(sampler, LengthGroupedSampler) and not isinstance(sampler.lengths, list):
            # The Trainer hands the sampler `dataset["length"]`, which datasets returns as a lazy column; the
            # sampler sorts by indexing it one row at a time at every epoch, inside the time budget.
            sampler.lengths = [int(n) for n in sampler.lengths[:]]
        return sampler

    def _progress(self) -> float:
        if self.time_budget:
            return self._clock_progress
        total = max(1, self.state.max_steps)
        return min(1.0, self.state.global_step / total)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if not self.time_budget:
            return super().create_scheduler(num_training_steps, optimizer)
        warmup = self.args.warmup_steps if 0 < self.args.warmup_steps < 1 else 0.0

        def factor(_step: int) -> float:  # linear warm-up, then linear decay to 0, both in elapsed time
            p = self._progress()
            return p / warmup if p < warmup else max(0.0, (1.0 - p) / max(1e-9, 1.0 - warmup))

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, factor)
        return self.lr_scheduler

    def train(self, *args, **kwargs):
        # A sparse gradient only while this trainer trains: another optimizer given the model later would refuse it.
        # Several processes keep it dense (see _use_row_sparse_embeddings).
        one_process = self.args.sparse_embeddings and self.args.world_size == 1
        table = self.model.get_input_embeddings() if one_process else None
        was_sparse = table is not None and table.sparse
        if table is not None:
            table.sparse = True
        try:
            return super().train(*args, **kwargs)
        finally:
            if table is not None:
                table.sparse = was_sparse

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # Every loss calls `model` itself, so under DDP the gradients are synchronised.
        p = self._progress() if model.training else 1.0
        w_tr = self.schedule.transition_weight(p) if model.training else 0.0
        if 0 < w_tr < 1 and self.args.world_size > 1:
            # DDP allows one forward per backward: while the two losses anneal, each step takes one of them
            # with probability equal to its weight (the same mix in expectation), the same one on every rank.
            w_tr = float(random.Random(self.state.global_step * 7919 + self.args.seed).random() < w_tr)
        terms = {}
        loss = torch.zeros((), device=inputs["input_ids"].device)
        if w_tr > 0:
            terms["transition"] = self.transition(model, inputs)
            loss = loss + w_tr * terms["transition"]
        if w_tr < 1:
            restart = self.schedule.restart(p) if model.training else 0.0
            terms["rollout"], preds = self.rollout(model, self._parent_targets(inputs) if model.training else inputs,
                                                   restart)
            if "word_starts" in inputs and self.rollout.last_tail is not None:
                terms["tail"] = self.rollout.last_tail
            loss = loss + (1 - w_tr) * terms["rollout"]
            if self.schedule.similarity_weight > 0 or self.neighbour is not None:
                mask, tmask = inputs["attention_mask"], inputs["target_mask"]
                last, rows = _last_positions(mask), torch.arange(len(mask), device=mask.device)
                student_final, teacher_final = preds[rows, last], inputs["targets"][rows, last]
                if len(mask) > 1 and bool((tmask[rows, last] > 0).all()):
                    if self.schedule.similarity_weight > 0:
                        terms["similarity"] = self.similarity(student_final, teacher_final)
                        loss = loss + self.schedule.similarity_weight * (1 - w_tr) * terms["similarity"]
                    if self.neighbour is not None:
                        terms["neighbour"] = self.neighbour(student_final, teacher_final)
                        loss = loss + self.schedule.neighbour_weight * (1 - w_tr) * terms["neighbour"]
        if self.schedule.keystroke_weight > 0 and len(inputs.get("keystroke_ids", ())):
            terms["keystroke"] = self.keystroke(model, inputs)
            loss = loss + self.schedule.keystroke_weight * terms["keystroke"]
        if model.training:
            self._last_terms = {f"loss_{k}": float(v.detach()) for k, v in terms.items()}
        return (loss, {"loss": loss}) if return_outputs else loss

    def _parent_targets(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The batch with its targets moved `parent_weight` of the way to the parent's trajectory (renormalised)."""
        if self.parent is None:
            return inputs
        with torch.no_grad():
            ids, mask, tmask = inputs["input_ids"], inputs["attention_mask"], inputs["target_mask"]
            theirs = self.parent(ids, attention_mask=mask, use_cache=False, output_steps=tmask > 0).last_hidden_state
        w, targets = self.args.parent_weight, inputs["targets"]
        mixed = (1 - w) * targets + w * theirs.to(targets.dtype)
        return {**inputs, "targets": torch.nn.functional.normalize(mixed, dim=-1)}

    def create_model_card(self, *args, **kwargs):
        # The Trainer's generic card would replace the card `hub.save_student` writes with measured results.
        pass

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        # The distillation loss is the evaluation loss; there are no logits or labels to gather.
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def log(self, logs: Dict[str, float], *args, **kwargs) -> None:
        if "loss" in logs and getattr(self, "_last_terms", None):
            logs.update(self._last_terms)
            logs["transition_weight"] = self.schedule.transition_weight(self._progress())
        if self.time_budget and "train_samples_per_second" in logs and "train_runtime" in logs:
            # Some transformers releases derive these from max_steps, which a clock-stopped run sets to "never" (5.17
            # printed 7.4e+08 samples/s on a GPU; 5.23 counts the steps run). In place: train() returns this dict.
            runtime = max(logs["train_runtime"], 1e-9)
            batch = self.args.per_device_train_batch_size * self.args.gradient_accumulation_steps * self.args.world_size
            logs["train_steps_per_second"] = round(self.state.global_step / runtime, 3)
            logs["train_samples_per_second"] = round(self.state.global_step * batch / runtime, 3)
        super().log(logs, *args, **kwargs)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> Dict[str, float]:
        metrics = super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dataset is not None and self.is_world_process_zero():
            student = self.accelerator.unwrap_model(self.model)
            was_training = student.training
            rows = rows_to_tensors(dataset)
            extra = fidelity(student_trajectories(student, rows, self.args.per_device_eval_batch_size), rows)
            student.train(was_training)
            extra = {f"{metric_key_prefix}_{k}": v for k, v in extra.items()}
            metrics.update(extra)
            self.log(extra)
        return metrics


class _TimeBudgetCallback(TrainerCallback):
    def __init__(self, trainer: "DistillationTrainer"):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer._clock_start = time.perf_counter()
        self.trainer._clock_progress = 0.0

    def on_step_end(self, args, state, control, **kwargs):
        # Each process has its own clock. Under DDP they must agree, or one stops while the other waits
        # for its gradients forever (and their loss weights drift apart): all take the furthest clock.
        p = min(1.0, (time.perf_counter() - self.trainer._clock_start) / self.trainer.time_budget)
        if args.world_size > 1:
            p = float(self.trainer.accelerator.gather(torch.tensor([p], device=args.device)).max())
        self.trainer._clock_progress = p
        if p >= 1.0:
            control.should_training_stop = True


class TimeBudgetProgressCallback(ProgressCallback):
    """The training bar of a time-budgeted run: elapsed and remaining time of the budget, steps and
    samples/s, in place of steps out of `max_steps`. Evaluation bars and logs are the stock callback's."""

    def __init__(self, trainer: "DistillationTrainer"):
        super().__init__()
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.training_bar = tqdm(total=self.trainer.time_budget, dynamic_ncols=True, desc="train", postfix=[""],
                                     bar_format="{desc} {percentage:3.0f}%|{bar}| {postfix[0]}")
            self._batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
        self.current_step = 0

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            budget, bar = self.trainer.time_budget, self.training_bar
            elapsed = self.trainer._clock_progress * budget
            rate = state.global_step * self._batch / max(time.perf_counter() - self.trainer._clock_start, 1e-9)
            bar.n = min(elapsed, budget)
            bar.postfix[0] = (f"{bar.format_interval(elapsed)} of {bar.format_interval(budget)}, "
                              f"{bar.format_interval(max(budget - elapsed, 0))} left, step {state.global_step}, "
                              f"{rate:.1f} samples/s")
            bar.refresh()
            self.current_step = state.global_step
