"""Distil a recurrent student from a transformer sentence encoder (the logic behind examples/distill.py
and `tf2rnn distill`).

    python examples/distill.py --preset quick                      # one process
    accelerate launch examples/distill.py --preset quick           # several processes / GPUs / machines
    accelerate launch --multi_gpu --num_processes 2 examples/distill.py --use_cpu ...   # two CPU processes

It builds (or reuses) the teacher-trajectory cache, trains with `DistillationTrainer`, evaluates
free-running fidelity on held-out text against the baselines, saves the model and tokenizer, writes
`results.json`, and pushes to the Hub with `--push_to_hub`.
"""

import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Optional

import datasets
import torch
from transformers import HfArgumentParser, TrainingArguments, set_seed

from . import trajectories
from .corpus import load_texts, passages
from .configuration_tf2rnn import TF2RNNConfig
from .evaluation import fidelity_table, format_table
from .modeling_tf2rnn import TF2RNNModel
from .teacher import Teacher
from .trainer import DistillationTrainer, KeystrokeCollator, LossSchedule, TrajectoryCollator

logger = logging.getLogger(__name__)

# Presets are command-line defaults; anything given on the command line wins.
PRESETS = {
    # The README's main job: about 15 minutes on 2 CPU cores.
    "quick": ["--max_train_texts", "12000", "--max_eval_texts", "1000", "--train_minutes", "7",
              "--hidden_size", "768", "--per_device_train_batch_size", "64", "--learning_rate", "2e-3",
              "--warmup_steps", "0.03", "--transition_until", "0.3", "--anneal", "0.2",
              "--output_dir", "outputs/tf2rnn-quick", "--save_strategy", "no", "--logging_steps", "50",
              "--report_to", "none"],
    # For tests: seconds.
    "tiny": ["--max_train_texts", "64", "--max_eval_texts", "32", "--hidden_size", "32", "--max_steps", "6",
             "--per_device_train_batch_size", "8", "--token_init", "input_embeddings", "--max_tokens", "16",
             "--learning_rate", "3e-3", "--output_dir", "outputs/tf2rnn-tiny"],
}


@dataclass
class ModelArguments:
    teacher: str = field(default="built-in", metadata={"help": "'built-in', a folder or a Hub model id."})
    cell_type: str = field(default="gru", metadata={"help": "gru, lstm, linear_attention, rem or multistate."})
    hidden_size: int = 768
    num_hidden_layers: int = 1
    token_init: str = field(default="teacher_outputs", metadata={"help": "teacher_outputs, input_embeddings, random."})
    residual_token_mean: Optional[bool] = field(default=None, metadata={
        "help": "Add the running token mean to the readout (default: on for token students, off for byte)."})
    student_granularity: str = field(default="token", metadata={
        "help": "The student's step: 'token' (the teacher's WordPiece) or 'byte' (UTF-8 bytes, ByT5 tokenizer; "
                "trains on character-level trajectories)."})
    num_slots: int = 32
    num_attention_heads: int = 4
    init_from: Optional[str] = field(default=None, metadata={"help": "Continue from a saved student."})


@dataclass
class DataArguments:
    corpus: str = field(default="offline", metadata={"help": "'offline', a local file/folder or a Hub dataset id."})
    eval_corpus: Optional[str] = field(default=None, metadata={
        "help": "Held-out text (same kinds as --corpus); default: --corpus at --eval_split."})
    text_column: str = "text"
    train_split: str = "train"
    eval_split: str = "heldout"
    max_train_texts: Optional[int] = 20000
    max_eval_texts: Optional[int] = 1000
    granularity: str = field(default="token", metadata={
        "help": "'token' trajectories, or 'char' (every keystroke; needed by --keystroke_weight)."})
    stride: int = 1
    max_tokens: int = 64
    passage_tokens: Optional[int] = field(default=None, metadata={
        "help": "Join consecutive training texts into passages of at least this many tokens (raise --max_tokens "
                "above it; --stride keeps their trajectories affordable): trains the state past sentence length."})
    passage_fraction: float = field(default=1.0, metadata={
        "help": "With --passage_tokens: the share of training texts joined into passages (the rest stay as they are)."})
    passage_stride: Optional[int] = field(default=None, metadata={
        "help": "With --passage_tokens: the passages' --stride (default: --stride), so sentences can keep a target "
                "at every prefix while long passages, whose teacher calls cost most, get a sparser one."})
    teacher_bf16: bool = True
    token_budget: int = 4096
    shard_size: int = 2000
    cache_dir: Optional[str] = None


@dataclass
class DistillArguments:
    preset: Optional[str] = field(default=None, metadata={"help": f"One of {sorted(PRESETS)}."})
    # The presets use the schedule that measured best at equal CPU time (benchmarks/quality/results/
    # ablation-*.json): transition for the first 30%, annealed into rollout over the next 20%. The bare
    # default is rollout alone, the one loss every cell supports.
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
        "help": "Weight of the streaming-path loss on keystrokes inside a word (needs --granularity char)."})
    partials_per_text: int = field(default=4, metadata={"help": "Keystrokes inside a word sampled per text."})
    loss_metric: str = "cosine"
    final_weight: float = 1.0
    tbptt: Optional[int] = None
    train_minutes: Optional[float] = field(default=None, metadata={
        "help": "Train for this long (wall clock); the loss schedule and learning rate follow the clock."})
    results_file: str = "results.json"
    trajectories_only: bool = field(default=False, metadata={
        "help": "Build the trajectory caches and stop: lets several processes compute them "
                "(`accelerate launch ... --trajectories_only`) for a training run in one process."})


def parse(argv):
    parser = HfArgumentParser((ModelArguments, DataArguments, DistillArguments, TrainingArguments))
    if len(argv) == 1 and argv[0].endswith(".json"):
        return parser.parse_json_file(argv[0])
    preset = None
    if "--preset" in argv:
        preset = argv[argv.index("--preset") + 1]
        if preset not in PRESETS:
            parser.error(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    defaults = PRESETS.get(preset, [])
    if not torch.cuda.is_available() and "--use_cpu" not in argv:
        # Without GPUs, processes started by `accelerate launch --multi_gpu` connect over gloo only
        # when training runs on the CPU explicitly.
        defaults = defaults + ["--use_cpu", "true"]
    if "--output_dir" not in argv + defaults:
        defaults = defaults + ["--output_dir", "outputs/tf2rnn-student"]
    return parser.parse_args_into_dataclasses(args=defaults + list(argv))


def main(argv=None) -> dict:
    model_args, data_args, distill_args, training_args = parse(sys.argv[1:] if argv is None else argv)
    byte_student = (TF2RNNConfig.from_pretrained(model_args.init_from).granularity if model_args.init_from
                    else model_args.student_granularity) == "byte"
    if byte_student:
        if distill_args.keystroke_weight > 0:
            raise ValueError("--keystroke_weight is for token students; a byte student's every target is a keystroke.")
        data_args.granularity = "char"  # a byte student's targets are the teacher's embedding per keystroke
    if distill_args.keystroke_weight > 0 and data_args.granularity != "char":
        raise ValueError("--keystroke_weight trains on keystrokes inside words: it needs --granularity char.")
    if distill_args.keystroke_weight > 0 and training_args.world_size > 1:
        raise ValueError("--keystroke_weight runs a second forward per step, which DDP does not allow: "
                         "train with it in one process.")
    logging.basicConfig(level=logging.INFO if training_args.process_index == 0 else logging.WARNING,
                        format="%(asctime)s %(name)s: %(message)s")
    training_args.remove_unused_columns = False  # the collator needs the trajectory columns
    set_seed(training_args.seed)
    timings = {}
    t0 = time.perf_counter()

    teacher = Teacher(model_args.teacher, device=training_args.device)  # each process its own GPU, or the CPU
    settings = trajectories.TrajectorySettings(
        granularity=data_args.granularity, max_tokens=data_args.max_tokens, stride=data_args.stride,
        bf16=data_args.teacher_bf16, token_budget=data_args.token_budget, shard_size=data_args.shard_size)
    # The main process builds shared artefacts first (the offline corpus, token vectors); the others then
    # read them from the cache instead of racing to write them.
    with training_args.main_process_first(desc="corpus"):
        train_texts = load_texts(data_args.corpus, data_args.train_split, data_args.text_column,
                                 data_args.max_train_texts, data_args.cache_dir)["text"]
        eval_texts = load_texts(data_args.eval_corpus or data_args.corpus, data_args.eval_split,
                                data_args.text_column, data_args.max_eval_texts, data_args.cache_dir)["text"]
    # (texts, settings) pairs whose trajectories make the training set: sentences, then any passages.
    parts = [(list(train_texts), settings)]
    if data_args.passage_tokens:
        if data_args.passage_tokens >= data_args.max_tokens:
            raise ValueError(f"--passage_tokens {data_args.passage_tokens} needs --max_tokens above it "
                             f"(got {data_args.max_tokens}), or passages are cut back to sentence length.")
        if not 0 < data_args.passage_fraction <= 1:
            raise ValueError(f"--passage_fraction must be in (0, 1], got {data_args.passage_fraction}.")
        k = round(len(train_texts) * data_args.passage_fraction)
        joined = passages(train_texts[:k], teacher.tokenizer, min_tokens=data_args.passage_tokens, count=None)
        parts = [(list(train_texts[k:]), settings),
                 (joined, replace(settings, stride=data_args.passage_stride or settings.stride))]
    parts = [(texts, part_settings) for texts, part_settings in parts if texts]
    train_ds = datasets.concatenate_datasets(
        [trajectories.build(texts, teacher, part_settings, data_args.cache_dir) for texts, part_settings in parts])
    # Held-out fidelity: token trajectories for a token student (whatever it trained on), keystrokes for bytes.
    eval_settings = trajectories.TrajectorySettings(**{**asdict(settings), "stride": 1,
                                                       "granularity": "char" if byte_student else "token"})
    eval_ds = trajectories.build(eval_texts, teacher, eval_settings, data_args.cache_dir)
    if byte_student:
        train_ds, eval_ds = trajectories.byte_rows(train_ds), trajectories.byte_rows(eval_ds)
    timings["trajectories_s"] = time.perf_counter() - t0
    trajectory_stats = trajectories.stats(*(trajectories.cache_path(teacher, texts, part_settings,
                                                                    data_args.cache_dir)
                                            for texts, part_settings in parts))
    if distill_args.trajectories_only:
        logger.info("Trajectories cached (%s); --trajectories_only: stopping before training.", trajectory_stats)
        return {"timings": timings, "trajectory_stats": trajectory_stats}

    schedule = LossSchedule(distill_args.transition_until, distill_args.anneal, distill_args.restart_prob,
                            distill_args.similarity_weight, distill_args.keystroke_weight,
                            distill_args.neighbour_weight)
    if model_args.init_from:
        model = TF2RNNModel.from_pretrained(model_args.init_from)
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_args.init_from)
    else:
        with training_args.main_process_first(desc="token vectors"):
            model, tokenizer = TF2RNNModel.from_teacher(
                teacher, cell_type=model_args.cell_type, hidden_size=model_args.hidden_size,
                num_hidden_layers=model_args.num_hidden_layers, token_init=model_args.token_init,
                granularity=model_args.student_granularity, num_slots=model_args.num_slots,
                **({} if model_args.residual_token_mean is None else
                   {"residual_token_mean": model_args.residual_token_mean}),
                num_attention_heads=model_args.num_attention_heads, state_lift=schedule.uses_transition)
    if schedule.uses_transition and schedule.transition_weight(1.0) == 0:
        # Parts used only in one phase would stall DDP's gradient reduction in the other.
        training_args.ddp_find_unused_parameters = True

    if settings.granularity == "char" and not byte_student:
        collator = KeystrokeCollator(tokenizer.pad_token_id, partials_per_text=distill_args.partials_per_text,
                                     seed=training_args.seed)
    else:
        collator = TrajectoryCollator(pad_token_id=tokenizer.pad_token_id)
    budget = distill_args.train_minutes * 60 if distill_args.train_minutes else None
    if budget:
        training_args.max_steps = 10 ** 9  # the clock stops training, not a step count
    trainer = DistillationTrainer(
        model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds, data_collator=collator,
        processing_class=tokenizer, schedule=schedule, metric=distill_args.loss_metric,
        final_weight=distill_args.final_weight, tbptt=distill_args.tbptt, time_budget=budget,
        neighbour_bank=distill_args.neighbour_bank, neighbour_temperature=distill_args.neighbour_temperature)
    t1 = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    timings["train_s"] = time.perf_counter() - t1
    trainer.save_model()

    results = {"timings": timings, "train": train_result.metrics, "world_size": training_args.world_size}
    if trainer.is_world_process_zero():
        t2 = time.perf_counter()
        table = fidelity_table(trainer.accelerator.unwrap_model(trainer.model), eval_ds, teacher,
                               baselines=not byte_student)
        timings["evaluate_s"] = time.perf_counter() - t2
        results.update({"fidelity": table, "trajectory_stats": trajectory_stats,
            "args": {"model": asdict(model_args), "data": asdict(data_args), "distill": asdict(distill_args)}})
        Path(training_args.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(training_args.output_dir) / distill_args.results_file).write_text(json.dumps(results, indent=1))
        print(format_table(table, title=f"Held-out fidelity ({len(eval_ds)} texts, free-running)"))
    if training_args.push_to_hub:
        trainer.push_to_hub()
    return results

