"""The distillation job behind examples/distill.py and `tf2rnn distill`: distil a recurrent student from a
transformer sentence encoder, evaluate it and save it.

    python examples/distill.py --preset quick                      # one process
    accelerate launch examples/distill.py --preset quick           # several processes / GPUs / machines
    accelerate launch --multi_gpu --num_processes 2 examples/distill.py --use_cpu ...   # two CPU processes

It builds (or reuses) the teacher-trajectory cache, trains with `DistillationTrainer`, evaluates
free-running fidelity on held-out text against the baselines, saves the model, tokenizer and card, writes
`results.json`, and pushes to the Hub with `--push_to_hub`. Presets are JSON files in `presets/` (command-line
defaults; anything given on the command line wins), read by the release scripts too.
"""

import json
import logging
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Set

import datasets
import torch
from transformers import AutoTokenizer, HfArgumentParser, set_seed

from ..data import trajectories
from ..data.corpus import HELDOUT_PERCENT, load_texts, passages
from ..data.teacher import Teacher, fast_bf16
from ..evaluation.fidelity import fidelity_table
from ..evaluation.report import format_table
from ..hub.save import write_card
from ..models import CELL_TYPES, TF2RNNConfig
from ..utils import continuation_table
from .collators import KeystrokeCollator, TrajectoryCollator
from .student import TOKEN_INITS, TF2RNNForDistillation, build_student, least_squares_adapter
from .trainer import DistillationTrainer
from .training_args import DistillationTrainingArguments

logger = logging.getLogger(__name__)
PRESETS_DIR = Path(__file__).parent / "presets"


def presets() -> List[str]:
    """Names of the shipped presets (`presets/<name>.json`)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def preset_argv(name: str) -> List[str]:
    """A preset's options as command-line arguments."""
    path = PRESETS_DIR / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"Unknown preset {name!r}; choose one of {presets()}.")
    argv = []
    for key, value in json.loads(path.read_text()).items():
        argv += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


CALIBRATION_TEXTS = 512  # training texts the teacher runs to rank its feed-forward neurons (--intermediate_size)


@dataclass
class ModelArguments:
    """The student: its cell, size and initialisation (or a saved student to continue from)."""

    teacher: str = field(default="built-in", metadata={"help": "'built-in', a folder or a Hub model id."})
    cell_type: str = field(default="gru", metadata={"help": "One of " + ", ".join(CELL_TYPES) + "."})
    hidden_size: Optional[int] = field(default=None, metadata={
        "help": "Width of the cell (default 768; the teacher's for cells that inherit it)."})
    num_hidden_layers: Optional[int] = field(default=None, metadata={
        "help": "Stacked layers (default 1; all of the teacher's for cells that inherit it)."})
    residual_layers: bool = field(default=False, metadata={
        "help": "gru: layers after the first are pre-norm residual blocks (for --num_hidden_layers > 1)."})
    readout_hidden_size: Optional[int] = field(default=None, metadata={
        "help": "Width of a two-layer MLP readout (default: a linear readout)."})
    teacher_layers: Optional[str] = field(default=None, metadata={
        "help": "tova_attention: comma-separated teacher layers to copy (default: evenly spaced, ending at the last)."})
    intermediate_size: Optional[int] = field(default=None, metadata={
        "help": "Feed-forward neurons per layer of the attention-like cells. tova_attention: fewer than the teacher's "
                "keeps each layer's most important ones, ranked and refitted on the first 512 training texts "
                "(default: all of them)."})
    token_init: Optional[str] = field(default=None, metadata={
        "help": "One of " + ", ".join(TOKEN_INITS) + " (default: teacher_outputs; input_embeddings for cells that "
                "inherit the teacher, which may take layer_inputs: what their first copied layer reads for each "
                "token alone)."})
    residual_token_mean: Optional[bool] = field(default=None, metadata={
        "help": "Add the running token mean to the readout (default: on for token students, off for byte)."})
    granularity: str = field(default="token", metadata={
        "help": "The student's step: 'token' (the teacher's WordPiece) or 'byte' (UTF-8 bytes, ByT5 tokenizer; "
                "trains on character-level trajectories)."})
    num_slots: Optional[int] = field(default=None, metadata={
        "help": "tova_attention and multi_state: the bounded cache's slots (default 32; with --init_from, the saved "
                "student's). A budget, not a shape: --init_from with --num_slots trains the saved weights at this "
                "count."})
    bidirectional_pooling: bool = field(default=False, metadata={
        "help": "tova_attention: add the O(1) bidirectional linear-attention term to the pooled mean."})
    open_tokens: Optional[int] = field(default=None, metadata={
        "help": "tova_attention: keep the newest this many tokens open (they read each other both ways and enter "
                "the cache as a block; default 1, causal)."})
    pooling_position_exponent: Optional[float] = field(default=None, metadata={
        "help": "tova_attention: pool step n with weight (n + 1) ** p, p learned from this start (1: SGPT's "
                "position-weighted mean); unset keeps the teacher's plain mean."})
    num_attention_heads: Optional[int] = field(default=None, metadata={
        "help": "Heads of the attention-like cells (default 4; the teacher's for cells that inherit it)."})
    tail_layers: Optional[int] = field(default=None, metadata={
        "help": "Causal tova_attention: also train the embedding a keystroke would show if the layers above this many "
                "read only finished words (TF2RNNConfig.tail_layers; with --init_from, added to the saved student)."})
    tail_open_tokens: Optional[int] = field(default=None, metadata={
        "help": "With --tail_layers: keep the newest this many tokens open in the upper layers only, which run at word "
                "ends (TF2RNNConfig.tail_open_tokens; texts longer than --num_slots train step by step, slowly; with "
                "--init_from, added to the saved student)."})
    init_from: Optional[str] = field(default=None, metadata={
        "help": "Continue from a saved student: its cell, width and layers are the saved ones (only --num_slots, "
                "--tail_layers and --tail_open_tokens apply)."})


@dataclass
class DataArguments:
    """The text and the teacher trajectories built from it."""

    corpus: str = field(default="offline", metadata={
        "help": "'offline' or 'offline-xl' (built in), a local file/folder or a Hub dataset id."})
    eval_corpus: Optional[str] = field(default=None, metadata={
        "help": "Held-out text (same kinds as --corpus, read whole); default: --corpus at --eval_split (a local "
                "--corpus: the texts a stable hash holds out of it, which the student then does not train on)."})
    text_column: str = "text"
    exclude_sources: Optional[str] = field(default=None, metadata={
        "help": "Comma-separated sources (the offline corpus's packages) whose texts are dropped from the "
                "--max_train_texts drawn (transfer runs; draw across sources with --train_sample_seed)."})
    eval_sources: Optional[str] = field(default=None, metadata={
        "help": "Comma-separated sources the held-out texts are drawn from (default: all)."})
    train_split: str = "train"
    eval_split: str = "heldout"
    max_train_texts: Optional[int] = field(default=20000, metadata={
        "help": "Train on at most this many texts of the training split (the log says how many it held)."})
    train_sample_seed: Optional[int] = field(default=None, metadata={
        "help": "Take --max_train_texts as a stable random sample of the training split (across its sources) "
                "instead of its first rows (the offline corpus runs source by source: its first 12,000 rows are "
                "WordNet glosses)."})
    max_eval_texts: Optional[int] = 1000
    prefix_unit: str = field(default="token", metadata={
        "help": "Trajectories over 'token' prefixes, or 'char' (every keystroke; needed by --keystroke_weight)."})
    stride: int = 1
    dense_prefixes: int = field(default=0, metadata={
        "help": "With --stride: every prefix up to this many tokens (or keystrokes) keeps its target; short "
                "prefixes are the teacher's cheapest calls and what a user types first."})
    max_tokens: int = 64
    passage_tokens: Optional[int] = field(default=None, metadata={
        "help": "Join consecutive training texts into passages of at least this many tokens (raise --max_tokens "
                "above it; --stride keeps their trajectories affordable): trains the state past sentence length."})
    passage_fraction: float = field(default=1.0, metadata={
        "help": "With --passage_tokens: the share of training texts joined into passages (the rest stay as they are)."})
    passage_stride: Optional[int] = field(default=None, metadata={
        "help": "With --passage_tokens: the passages' --stride (default: --stride), so sentences can keep a target "
                "at every prefix while long passages, whose teacher calls cost most, get a sparser one."})
    teacher_bf16: Optional[bool] = field(default=None, metadata={
        "help": "Teacher under bf16 autocast for the trajectories (default: where its device computes bf16 "
                "natively; emulated bf16 is several times slower than fp32)."})
    token_budget: int = 4096
    shard_size: int = 2000
    trajectory_workers: int = field(default=0, metadata={
        "help": "Processes that tokenise and write trajectory shards while the teacher embeds: a GPU teacher's "
                "pass is otherwise bound by one CPU core (0: all in this process)."})
    cache_dir: Optional[str] = None


@dataclass
class RunArguments:
    """The job itself: a preset, where results go, and whether to stop after the trajectories."""

    preset: Optional[str] = field(default=None, metadata={"help": "A file of presets/ (quick, tiny, release, ...)."})
    results_file: str = "results.json"
    trajectories_only: bool = field(default=False, metadata={
        "help": "Build the trajectory caches and stop: lets several processes compute them "
                "(`accelerate launch ... --trajectories_only`) for a training run in one process."})


def parse(argv: List[str]):
    """The four argument groups from argv (or one JSON file), a preset's values under the command line's. Training
    on a CPU that computes bf16 natively defaults to `--bf16 true`."""
    parser = HfArgumentParser((ModelArguments, DataArguments, RunArguments, DistillationTrainingArguments))
    if len(argv) == 1 and argv[0].endswith(".json"):
        return parser.parse_json_file(argv[0])
    defaults = []
    if "--preset" in argv:
        try:
            defaults = preset_argv(argv[argv.index("--preset") + 1])
        except (ValueError, IndexError) as err:
            parser.error(str(err) if isinstance(err, ValueError) else f"--preset needs a name: {presets()}")
        if "--init_from" in argv and "--num_slots" in defaults:
            # A preset's slot count is for the fresh student it builds; a saved one keeps its own unless the
            # command line names one.
            at = defaults.index("--num_slots")
            del defaults[at:at + 2]
    if not torch.cuda.is_available() and "--use_cpu" not in argv:
        # Without GPUs, processes started by `accelerate launch --multi_gpu` connect over gloo only
        # when training runs on the CPU explicitly.
        defaults = defaults + ["--use_cpu", "true"]
    if not torch.cuda.is_available() and fast_bf16("cpu"):
        # A CPU that computes bf16 natively (AMX, AVX512-BF16) trains ~1.5x the samples a minute under autocast
        # (docs/experiments.md, session 42); elsewhere bf16 is emulated, several times slower than fp32. First, so
        # that a preset's or the command line's --bf16 wins.
        defaults = ["--bf16", "true"] + defaults
    if "--output_dir" not in argv + defaults:
        defaults = defaults + ["--output_dir", "outputs/tf2rnn-student"]
    return parser.parse_args_into_dataclasses(args=defaults + list(argv))


def left_out_texts(train_rows: datasets.Dataset, data_args: DataArguments) -> Set[str]:
    """The drawn training texts of `--exclude_sources`. The draw comes first (so a transfer run trains on
    the all-sources run's texts less the left-out ones); leaving out none or all of them is an error."""
    if not data_args.exclude_sources:
        return set()
    if "source" not in train_rows.column_names:
        raise ValueError(f"--exclude_sources: {data_args.corpus!r} has no 'source' column to leave texts out by.")
    excluded = set(data_args.exclude_sources.split(","))
    left_out = {t for t, s in zip(train_rows["text"], train_rows["source"]) if s in excluded}
    if not left_out or len(left_out) == len(train_rows):
        raise ValueError(f"--exclude_sources {data_args.exclude_sources} leaves out "
                         f"{'none' if not left_out else 'all'} of the {len(train_rows)} training texts drawn (their "
                         f"sources: {sorted(set(train_rows['source']))}). Check the names, or draw the texts across "
                         "sources with --train_sample_seed (the offline corpus's first rows are all WordNet glosses).")
    return left_out


def main(argv: Optional[List[str]] = None) -> dict:
    """Distil, evaluate and save a student; returns (and writes) the results. See the module docstring."""
    model_args, data_args, run_args, training_args = parse(sys.argv[1:] if argv is None else argv)
    byte_student = (TF2RNNConfig.from_pretrained(model_args.init_from).granularity if model_args.init_from
                    else model_args.granularity) == "byte"
    if byte_student:
        if training_args.keystroke_weight > 0:
            raise ValueError("--keystroke_weight is for token students; a byte student's every target is a keystroke.")
        data_args.prefix_unit = "char"  # a byte student's targets are the teacher's embedding per keystroke
    if training_args.keystroke_weight > 0 and data_args.prefix_unit != "char":
        raise ValueError("--keystroke_weight trains on keystrokes inside words: it needs --prefix_unit char.")
    if training_args.parent_weight and not model_args.init_from:
        raise ValueError("--parent_weight moves the targets towards the student --init_from names; pass --init_from.")
    if training_args.keystroke_weight > 0 and training_args.world_size > 1:
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
        prefix_unit=data_args.prefix_unit, max_tokens=data_args.max_tokens, stride=data_args.stride,
        dense_prefixes=data_args.dense_prefixes, bf16=data_args.teacher_bf16, token_budget=data_args.token_budget,
        shard_size=data_args.shard_size)
    # The main process builds shared artefacts first (the offline corpus, token vectors); the others then
    # read them from the cache instead of racing to write them.
    with training_args.main_process_first(desc="corpus"):
        def split_list(value):
            return value.split(",") if value else None

        # A local corpus has no held-out split of its own: without --eval_corpus it is split as the built-in one,
        # so that the held-out figures (and the model card's) never score texts the student trained on.
        hold_out = data_args.eval_corpus is None
        train_rows = load_texts(data_args.corpus, data_args.train_split, data_args.text_column,
                                data_args.max_train_texts, data_args.cache_dir,
                                shuffle_seed=data_args.train_sample_seed, hold_out=hold_out)
        eval_texts = load_texts(data_args.eval_corpus or data_args.corpus, data_args.eval_split,
                                data_args.text_column, data_args.max_eval_texts, data_args.cache_dir,
                                only_sources=split_list(data_args.eval_sources), hold_out=hold_out)["text"]
    if not len(eval_texts):
        raise ValueError(f"No held-out texts in {data_args.eval_corpus or data_args.corpus} ({data_args.eval_split!r}) "
                         f"to score the student on (a local --corpus holds out {HELDOUT_PERCENT}% of its texts by a "
                         f"stable hash); pass --eval_corpus with texts it does not train on.")
    train_texts, left_out = list(train_rows["text"]), left_out_texts(train_rows, data_args)
    # (texts, settings) pairs whose trajectories make the training set: sentences, then any passages.
    parts = [(train_texts, settings)]
    if data_args.passage_tokens:
        if data_args.passage_tokens >= data_args.max_tokens:
            raise ValueError(f"--passage_tokens {data_args.passage_tokens} needs --max_tokens above it "
                             f"(got {data_args.max_tokens}), or passages are cut back to sentence length.")
        if not 0 < data_args.passage_fraction <= 1:
            raise ValueError(f"--passage_fraction must be in (0, 1], got {data_args.passage_fraction}.")
        k = round(len(train_texts) * data_args.passage_fraction)
        joined = passages([t for t in train_texts[:k] if t not in left_out], teacher.tokenizer,
                          min_tokens=data_args.passage_tokens, count=None)
        parts = [(list(train_texts[k:]), settings),
                 (joined, replace(settings, stride=data_args.passage_stride or settings.stride))]
    parts = [(texts, part_settings) for texts, part_settings in parts if texts]
    train_ds = datasets.concatenate_datasets(
        [trajectories.build(texts, teacher, part_settings, data_args.cache_dir, workers=data_args.trajectory_workers)
         for texts, part_settings in parts])
    if left_out:  # dropped after their trajectories: the left-out run reuses the shards of the full draw
        train_ds = train_ds.filter(lambda batch: [t not in left_out for t in batch["text"]], batched=True)
    # Held-out fidelity: token trajectories for a token student (whatever it trained on), keystrokes for bytes.
    eval_settings = trajectories.TrajectorySettings(**{**asdict(settings), "stride": 1, "dense_prefixes": 0,
                                                       "prefix_unit": "char" if byte_student else "token"})
    eval_ds = trajectories.build(eval_texts, teacher, eval_settings, data_args.cache_dir,
                                 workers=data_args.trajectory_workers)
    if byte_student:
        train_ds, eval_ds = trajectories.byte_rows(train_ds), trajectories.byte_rows(eval_ds)
    timings["trajectories_s"] = time.perf_counter() - t0
    trajectory_stats = trajectories.stats(*(trajectories.cache_path(teacher, texts, part_settings,
                                                                    data_args.cache_dir)
                                            for texts, part_settings in parts))
    if run_args.trajectories_only:
        logger.info("Trajectories cached (%s); --trajectories_only: stopping before training.", trajectory_stats)
        return {"timings": timings, "trajectory_stats": trajectory_stats}

    schedule = training_args.schedule
    parent = None
    if model_args.init_from:
        # The slot count is the one shape option a saved student can change (the same weights at another budget).
        overrides = {key: value for key, value in (("num_slots", model_args.num_slots),
                                                   ("tail_layers", model_args.tail_layers),
                                                   ("tail_open_tokens", model_args.tail_open_tokens))
                     if value is not None}
        model = TF2RNNForDistillation.from_pretrained(model_args.init_from, **overrides)
        if training_args.parent_weight:
            parent = TF2RNNForDistillation.from_pretrained(model_args.init_from, **overrides)
        tokenizer = AutoTokenizer.from_pretrained(model_args.init_from)
    else:
        with training_args.main_process_first(desc="token vectors"):
            model, tokenizer = build_student(
                teacher, cell_type=model_args.cell_type, hidden_size=model_args.hidden_size,
                num_hidden_layers=model_args.num_hidden_layers, token_init=model_args.token_init,
                granularity=model_args.granularity,
                teacher_layers=[int(i) for i in model_args.teacher_layers.split(",")] if model_args.teacher_layers
                else None,
                calibration_texts=train_texts[:CALIBRATION_TEXTS] if model_args.intermediate_size else None,
                **{key: value for key, value in (("residual_token_mean", model_args.residual_token_mean),
                                                 ("intermediate_size", model_args.intermediate_size),
                                                 ("num_attention_heads", model_args.num_attention_heads),
                                                 ("readout_hidden_size", model_args.readout_hidden_size),
                                                 ("residual_layers", model_args.residual_layers),
                                                 ("bidirectional_pooling", model_args.bidirectional_pooling or None),
                                                 ("open_tokens", model_args.open_tokens),
                                                 ("num_slots", model_args.num_slots),
                                                 ("pooling_position_exponent", model_args.pooling_position_exponent),
                                                 ("tail_layers", model_args.tail_layers),
                                                 ("tail_open_tokens", model_args.tail_open_tokens))
                   if value is not None},
                state_lift=schedule.uses_transition)
    k = getattr(model.config, "tail_layers", None)
    if k is not None and (not model_args.init_from or TF2RNNConfig.from_pretrained(model_args.init_from).tail_layers
                          is None):
        # A new adapter starts at the least-squares map on the calibration texts, not the identity.
        weight, bias = least_squares_adapter(model, tokenizer, train_texts[:CALIBRATION_TEXTS], k)
        with torch.no_grad():
            model.cell.tail_adapter.weight.copy_(weight)
            model.cell.tail_adapter.bias.copy_(bias)
    if schedule.uses_transition and schedule.transition_weight(1.0) == 0:
        # Parts used only in one phase would stall DDP's gradient reduction in the other.
        training_args.ddp_find_unused_parameters = True

    if k is not None and settings.prefix_unit == "char":
        raise ValueError("--tail_layers trains on token trajectories (its words start at WordPiece tokens); "
                         "drop --prefix_unit char.")
    if settings.prefix_unit == "char" and not byte_student:
        collator = KeystrokeCollator(tokenizer.pad_token_id, partials_per_text=training_args.partials_per_text,
                                     seed=training_args.seed)
    else:
        collator = TrajectoryCollator(pad_token_id=tokenizer.pad_token_id,
                                      continues_word=continuation_table(tokenizer) if k is not None else None)
    trainer = DistillationTrainer(
        model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds, data_collator=collator,
        processing_class=tokenizer, parent=parent)
    t1 = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    timings["train_s"] = time.perf_counter() - t1
    trainer.save_model()  # weights, config, custom code, sentence-transformers files, tokenizer

    results = {"timings": timings, "train": train_result.metrics, "world_size": training_args.world_size,
               "held_out_texts": len(eval_texts)}
    if "source" in train_rows.column_names:
        results["train_texts_by_source"] = dict(Counter(s for t, s in zip(train_texts, train_rows["source"])
                                                        if t not in left_out).most_common())
    if trainer.is_world_process_zero():
        t2 = time.perf_counter()
        table = fidelity_table(trainer.accelerator.unwrap_model(trainer.model), eval_ds, teacher,
                               baselines=not byte_student)
        timings["evaluate_s"] = time.perf_counter() - t2
        results.update({"fidelity": table, "trajectory_stats": trajectory_stats,
            "args": {"model": asdict(model_args), "data": asdict(data_args), "run": asdict(run_args),
                     "training": training_args.to_dict()}})
        Path(training_args.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(training_args.output_dir) / run_args.results_file).write_text(json.dumps(results, indent=1))
        write_card(trainer.accelerator.unwrap_model(trainer.model), training_args.output_dir)
        print(format_table(table, title=f"Held-out fidelity ({len(eval_ds)} texts, free-running)"))
    if training_args.push_to_hub:
        trainer.push_to_hub()
    return results

