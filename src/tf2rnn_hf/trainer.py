"""Distillation training: a collator for trajectory rows, the losses as small modules, a schedule that
mixes them, and `DistillationTrainer(transformers.Trainer)` which supplies the loss and fidelity metrics."""

import dataclasses
import random
import time
from typing import Dict, List, Optional

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer, TrainerCallback

from .modeling_tf2rnn import TF2RNNModel

METRICS = ("cosine", "mse")


class TrajectoryCollator:
    """Pads trajectory rows into a batch: input_ids/attention_mask [B, T], targets [B, T, D] (the teacher
    embedding after step t, where one exists) and target_mask [B, T]."""

    def __init__(self, pad_token_id: int = 0, max_steps: Optional[int] = None):
        self.pad_token_id = pad_token_id
        self.max_steps = max_steps

    def __call__(self, rows: List[dict]) -> Dict[str, torch.Tensor]:
        lengths = [len(r["input_ids"]) for r in rows]
        width = max(lengths) if self.max_steps is None else min(max(lengths), self.max_steps)
        dim = len(rows[0]["trajectory"][0])
        batch = len(rows)
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros(batch, width, dtype=torch.long)
        targets = torch.zeros(batch, width, dim)
        target_mask = torch.zeros(batch, width)
        for i, row in enumerate(rows):
            n = min(lengths[i], width)
            input_ids[i, :n] = torch.as_tensor(row["input_ids"][:n])
            attention_mask[i, :n] = 1
            steps = torch.as_tensor(row["target_steps"], dtype=torch.long) - 1
            traj = torch.as_tensor(row["trajectory"], dtype=torch.float32)
            keep = steps < n
            targets[i, steps[keep]] = traj[keep]
            target_mask[i, steps[keep]] = 1.0
        return {"input_ids": input_ids, "attention_mask": attention_mask, "targets": targets,
                "target_mask": target_mask}


class KeystrokeCollator(TrajectoryCollator):
    """Character-level trajectory rows -> the token batch of `TrajectoryCollator` (targets at the
    keystrokes whose tokens are a prefix of the text's tokens) plus, per text, up to `partials_per_text`
    keystrokes that end inside a word: what the streaming encoder runs (the tokens of the finished words,
    then the partial word's own tokens). keystroke_ids/keystroke_mask [P, L], keystroke_targets [P, D]."""

    def __init__(self, pad_token_id: int = 0, max_steps: Optional[int] = None, partials_per_text: int = 4,
                 seed: int = 0):
        super().__init__(pad_token_id, max_steps)
        self.partials_per_text = partials_per_text
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, rows: List[dict]) -> Dict[str, torch.Tensor]:
        token_rows, partial_ids, partial_targets = [], [], []
        for row in rows:
            prefixes, shared = row["char_input_ids"], row["shared_tokens"]
            traj = torch.as_tensor(row["trajectory"], dtype=torch.float32)
            whole = [j for j in range(len(prefixes)) if shared[j] == len(prefixes[j])]
            token_rows.append({"input_ids": row["input_ids"], "trajectory": traj[whole],
                               "target_steps": [len(prefixes[j]) for j in whole]})
            partial = [j for j in range(len(prefixes)) if shared[j] < len(prefixes[j])]
            if partial:
                pick = torch.randperm(len(partial), generator=self.generator)[:self.partials_per_text]
                for k in sorted(pick.tolist()):
                    partial_ids.append(list(prefixes[partial[k]])[:self.max_steps])
                    partial_targets.append(traj[partial[k]])
        batch = super().__call__(token_rows)
        width = max((len(p) for p in partial_ids), default=1)
        ids = torch.full((len(partial_ids), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros(len(partial_ids), width, dtype=torch.long)
        for i, p in enumerate(partial_ids):
            ids[i, :len(p)] = torch.as_tensor(p, dtype=torch.long)
            mask[i, :len(p)] = 1
        batch.update(keystroke_ids=ids, keystroke_mask=mask, keystroke_targets=(
            torch.stack(partial_targets) if partial_targets else torch.zeros(0, batch["targets"].shape[-1])))
        return batch


def step_loss(pred: torch.Tensor, target: torch.Tensor, metric: str) -> torch.Tensor:
    """Per-position loss between unit vectors: 1 - cos, or the mean squared error (= 2 (1 - cos) / D)."""
    if metric == "cosine":
        return 1.0 - F.cosine_similarity(pred, target, dim=-1)
    if metric == "mse":
        return (pred - target).pow(2).mean(-1)
    raise ValueError(f"Unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")


def position_weights(target_mask: torch.Tensor, attention_mask: torch.Tensor, final_weight: float) -> torch.Tensor:
    """Weight 1 at every target step, `final_weight` at each row's last step."""
    weights = target_mask.clone()
    last = attention_mask.sum(1) - 1
    rows = torch.arange(len(last))
    weights[rows, last] = weights[rows, last] * final_weight
    return weights


def _weighted_mean(loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (loss * weights).sum() / weights.sum().clamp(min=1e-9)


def _last_positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.sum(1) - 1).clamp(min=0)


class TransitionLoss(nn.Module):
    """Teacher-forced one step: from the teacher's e(t-1) (lifted into a cell state) and token t, predict
    e(t). All steps run in parallel as independent one-step problems: no backprop through time. Steps
    whose previous target is missing (sparse trajectories) are left out."""

    def __init__(self, metric: str = "cosine", final_weight: float = 1.0):
        super().__init__()
        self.metric, self.final_weight = metric, final_weight

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask, targets, tmask = (batch[k] for k in ("input_ids", "attention_mask", "targets", "target_mask"))
        has_prev = torch.cat([torch.ones_like(tmask[:, :1]), tmask[:, :-1]], 1)
        preds = model(ids, attention_mask=mask, teacher_states=targets).last_hidden_state
        weights = position_weights(tmask * has_prev, mask, self.final_weight)
        return _weighted_mean(step_loss(preds, targets, self.metric), weights)


class RolloutLoss(nn.Module):
    """Free-running: the student runs on its own states over the whole text, with a loss at every target
    step. `tbptt` truncates backprop every that many steps; `restart_prob` (scheduled sampling) restarts
    the state from the lifted teacher state before a step with that probability. Returns (loss, preds)."""

    def __init__(self, metric: str = "cosine", final_weight: float = 1.0, tbptt: Optional[int] = None):
        super().__init__()
        self.metric, self.final_weight, self.tbptt = metric, final_weight, tbptt

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor], restart_prob: float = 0.0):
        ids, mask, targets, tmask = (batch[k] for k in ("input_ids", "attention_mask", "targets", "target_mask"))
        if restart_prob > 0:
            has_prev = torch.cat([torch.zeros_like(tmask[:, :1]), tmask[:, :-1]], 1) > 0
            force = (torch.rand(ids.shape, device=ids.device) < restart_prob) & has_prev
            preds = model(ids, attention_mask=mask, teacher_states=targets, teacher_forcing=force).last_hidden_state
        elif self.tbptt and self.tbptt < ids.shape[1]:
            pieces, state = [], None
            for start in range(0, ids.shape[1], self.tbptt):
                out = model(ids[:, start:start + self.tbptt], attention_mask=mask[:, start:start + self.tbptt],
                            past_state=state, use_cache=True)
                pieces.append(out.last_hidden_state)
                state = out.past_state.detach()
            preds = torch.cat(pieces, 1)
        else:
            preds = model(ids, attention_mask=mask, use_cache=False).last_hidden_state
        weights = position_weights(tmask, mask, self.final_weight)
        return _weighted_mean(step_loss(preds, targets, self.metric), weights), preds


class KeystrokeLoss(nn.Module):
    """The streaming path: the student run free over the tokens of a keystroke that ends inside a word,
    against the teacher's embedding of that character prefix (see `KeystrokeCollator`)."""

    def __init__(self, metric: str = "cosine"):
        super().__init__()
        self.metric = metric

    def forward(self, model: nn.Module, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask, targets = batch["keystroke_ids"], batch["keystroke_mask"], batch["keystroke_targets"]
        preds = model(ids, attention_mask=mask, use_cache=False).pooler_output
        return step_loss(preds, targets, self.metric).mean()


class SimilarityLoss(nn.Module):
    """Match the teacher's in-batch similarity structure of final embeddings (mean squared difference of
    the off-diagonal cosine matrices): neighbour agreement depends on it more than on cosine alone."""

    def forward(self, student_final: torch.Tensor, teacher_final: torch.Tensor) -> torch.Tensor:
        s = student_final @ student_final.T
        t = teacher_final @ teacher_final.T
        off = ~torch.eye(len(s), dtype=torch.bool, device=s.device)
        return (s - t)[off].pow(2).mean() if off.any() else s.sum() * 0


def teacher_bank(dataset, size: int, seed: int = 0) -> torch.Tensor:
    """The teacher's final embeddings of up to `size` training rows picked at random ([size, D]): the
    fixed reference set `NeighbourLoss` ranks against (read once; the trajectories already hold them)."""
    pick = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))[:size].tolist()
    rows = dataset.select(pick).with_format("numpy", columns=["trajectory"])  # numpy: not millions of floats
    return F.normalize(torch.stack([torch.as_tensor(r["trajectory"][-1], dtype=torch.float32) for r in rows]), dim=-1)


class NeighbourLoss(nn.Module):
    """Relational distillation against a fixed bank of teacher embeddings: the KL divergence from the
    teacher's softmax over its similarities to the bank (temperature `temperature`) to the student's.
    In-batch texts are rarely near each other; a bank of thousands gives every text real neighbours, and
    the low temperature puts the weight on the nearest, which is what neighbour agreement@10 counts."""

    def __init__(self, bank: torch.Tensor, temperature: float = 0.05):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"The neighbour loss's temperature must be positive, got {temperature}.")
        self.register_buffer("bank", bank, persistent=False)
        self.temperature = temperature

    def forward(self, student_final: torch.Tensor, teacher_final: torch.Tensor) -> torch.Tensor:
        bank = self.bank.to(student_final.device)
        t = F.normalize(teacher_final, dim=-1) @ bank.T
        s = F.normalize(student_final, dim=-1) @ bank.T
        # A text's own bank entry (if drawn) says nothing about its neighbours.
        # (A finite fill: -inf would make 0 * (-inf - -inf) = nan in the KL.)
        own = t > 0.9999
        t, s = t.masked_fill(own, -1e4), s.masked_fill(own, -1e4)
        return F.kl_div(F.log_softmax(s / self.temperature, dim=-1), F.log_softmax(t / self.temperature, dim=-1),
                        reduction="batchmean", log_target=True)


@dataclasses.dataclass
class LossSchedule:
    """Weights of the losses over training progress p in [0, 1]: transition alone until
    `transition_until`, then annealed linearly into rollout over `anneal`; scheduled-sampling restarts
    decay from `restart_prob` to 0 over the rollout phase."""

    transition_until: float = 0.0
    anneal: float = 0.0
    restart_prob: float = 0.0
    similarity_weight: float = 0.0
    keystroke_weight: float = 0.0  # the streaming-path loss (needs character-level trajectories)
    neighbour_weight: float = 0.0  # `NeighbourLoss` on final embeddings, next to rollout

    def transition_weight(self, progress: float) -> float:
        if progress < self.transition_until:
            return 1.0
        if self.anneal <= 0:
            return 0.0
        return max(0.0, 1.0 - (progress - self.transition_until) / self.anneal)

    def restart(self, progress: float) -> float:
        span = max(1e-9, 1.0 - self.transition_until)
        return self.restart_prob * max(0.0, 1.0 - (progress - self.transition_until) / span)

    @property
    def uses_transition(self) -> bool:
        return self.transition_until > 0 or self.anneal > 0 or self.restart_prob > 0


class DistillationTrainer(Trainer):
    """A `Trainer` whose loss is the distillation schedule, and whose evaluation adds fidelity metrics
    (final and all-prefix cosine, free-running, neighbour agreement@10 and drift on the eval split),
    computed by `evaluation.fidelity`, the same code as `tf2rnn evaluate`."""

    def __init__(self, *args, schedule: Optional[LossSchedule] = None, metric: str = "cosine",
                 final_weight: float = 1.0, tbptt: Optional[int] = None, time_budget: Optional[float] = None,
                 neighbour_bank: int = 8192, neighbour_temperature: float = 0.05, **kwargs):
        if metric not in METRICS:
            raise ValueError(f"Unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")
        args_, data = kwargs.get("args"), kwargs.get("train_dataset")
        if (args_ is not None and args_.train_sampling_strategy == "group_by_length" and hasattr(data, "add_column")
                and args_.length_column_name not in data.column_names):
            # Batches of like lengths (sentences apart from passages) pad less. Without a length column the
            # Trainer would decode every row, trajectories included, to learn its length.
            kwargs["train_dataset"] = data.add_column(args_.length_column_name,
                                                      [len(ids) for ids in data["input_ids"]])
        super().__init__(*args, **kwargs)
        # With a time budget (seconds), progress is elapsed time: the loss schedule and the learning-rate
        # decay follow the clock and training stops when it runs out, so runs compare at equal CPU time.
        self.time_budget = time_budget
        self._clock_start: Optional[float] = None
        self._clock_progress = 0.0
        if time_budget:
            self.add_callback(_TimeBudgetCallback(self))
        self.schedule = schedule or LossSchedule()
        self.transition = TransitionLoss(metric, final_weight)
        self.rollout = RolloutLoss(metric, final_weight, tbptt)
        self.similarity = SimilarityLoss()
        self.keystroke = KeystrokeLoss(metric)
        self.neighbour = None
        if self.schedule.neighbour_weight > 0:
            if self.train_dataset is None:
                raise ValueError("The neighbour loss draws its bank from the training set: pass train_dataset.")
            self.neighbour = NeighbourLoss(teacher_bank(self.train_dataset, neighbour_bank, self.args.seed),
                                           neighbour_temperature)
        if self.schedule.uses_transition and getattr(self.model.config, "state_lift", False) is not True:
            raise ValueError("The schedule uses the transition loss or restarts: build the student with "
                             "state_lift=True (gru/lstm cells).")

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
        result = super().train(*args, **kwargs)
        if self.time_budget:  # the Trainer derives these from max_steps, which a clock-stopped run sets to "never"
            runtime = max(result.metrics.get("train_runtime", 0.0), 1e-9)
            batch = self.args.per_device_train_batch_size * self.args.gradient_accumulation_steps * self.args.world_size
            result.metrics["train_steps_per_second"] = round(self.state.global_step / runtime, 3)
            result.metrics["train_samples_per_second"] = round(self.state.global_step * batch / runtime, 3)
        return result

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
            terms["rollout"], preds = self.rollout(model, inputs, restart)
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

    def _save(self, output_dir: Optional[str] = None, state_dict=None):
        # Every checkpoint and the pushed folder also load with sentence-transformers and carry a card.
        from .hub import write_sentence_transformers_files
        from .modelcard import write_model_card

        super()._save(output_dir, state_dict)
        output_dir = output_dir or self.args.output_dir
        model = self.accelerator.unwrap_model(self.model)
        write_sentence_transformers_files(output_dir, model.config)
        write_model_card(output_dir, model.config, getattr(self, "evaluation_results", None),
                         repo_id=self.hub_model_id if self.args.push_to_hub else None,
                         state_bytes=model.init_state(1).nbytes())

    def create_model_card(self, *args, **kwargs):
        # The Trainer's generic card would replace ours on push_to_hub; ours carries the measured results.
        from .modelcard import write_model_card

        if self.is_world_process_zero():
            model = self.accelerator.unwrap_model(self.model)
            write_model_card(self.args.output_dir, model.config, getattr(self, "evaluation_results", None),
                             repo_id=self.hub_model_id, state_bytes=model.init_state(1).nbytes())

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
        super().log(logs, *args, **kwargs)

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval") -> Dict[str, float]:
        metrics = super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        dataset = eval_dataset if eval_dataset is not None else self.eval_dataset
        if dataset is not None and self.is_world_process_zero():
            from .evaluation import _rows_to_tensors, fidelity, student_trajectories

            student = self.accelerator.unwrap_model(self.model)
            was_training = student.training
            rows = _rows_to_tensors(dataset)
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
