"""DistillationTrainer: losses, the schedule, two accelerate processes, exact resume, held-out loss."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from conftest import tiny_model
from torch.nn.utils import parametrize
from transformers import TrainerCallback

from tf2rnn_hf.data import trajectories
from tf2rnn_hf.distill import (
    DistillationTrainer,
    DistillationTrainingArguments,
    KeystrokeCollator,
    LossSchedule,
    TrajectoryCollator,
    build_student,
)
from tf2rnn_hf.distill.losses import (
    RolloutLoss,
    SimilarityLoss,
    TransitionLoss,
    distance,
    position_weights,
    thin_block_middles,
    weighted_mean,
)
from tf2rnn_hf.distill.quantization_aware import round_weight
from tf2rnn_hf.distill.recipe import PRESETS_DIR, parse, presets
from tf2rnn_hf.distill.sparse_adamw import RowSparseAdamW
from tf2rnn_hf.distill.trainer import TimeBudgetProgressCallback
from tf2rnn_hf.inference.kernels import Int8TOVAStep, quantize_rows4
from tf2rnn_hf.inference.kernels.naive import int8_tova_step
from tf2rnn_hf.models import TF2RNNModel

ROOT = Path(__file__).parents[2]
ACCELERATE = [sys.executable, "-m", "accelerate.commands.launch"]  # `accelerate launch`, whatever PATH holds
RANK_SCRIPT = ROOT / "tests" / "scripts" / "distill_rank_weights.py"
TEXTS = [f"The {a} {b} near the {c}." for a in ("old", "quick", "silent", "red") for b in
         ("river flows", "dog sleeps", "engine hums", "poet writes") for c in ("bridge", "house", "forest")]


@pytest.fixture(scope="module")
def data(teacher, tmp_path_factory):
    settings = trajectories.TrajectorySettings(bf16=False, max_tokens=16, shard_size=64)
    cache = tmp_path_factory.mktemp("traj")
    train = trajectories.load(trajectories.generate(TEXTS[:30], teacher, settings, cache, progress=False))
    held = trajectories.load(trajectories.generate(TEXTS[30:], teacher, settings, cache, progress=False))
    return train, held


def _student(teacher, **kw):
    torch.manual_seed(0)
    model, tok = build_student(teacher, hidden_size=32, token_init="input_embeddings", **kw)
    return model, tok


def test_collator_places_targets(data):
    rows = [data[0][i] for i in range(3)]
    batch = TrajectoryCollator(pad_token_id=0)(rows)
    n = [len(r["input_ids"]) for r in rows]
    assert batch["input_ids"].shape == (3, max(n)) and batch["targets"].shape == (3, max(n), 384)
    assert batch["attention_mask"].sum(1).tolist() == n == batch["target_mask"].sum(1).int().tolist()
    assert torch.allclose(batch["targets"][0, n[0] - 1], torch.tensor(rows[0]["trajectory"][-1]).float())


def test_collator_marks_the_tokens_that_begin_a_word(teacher):
    from tf2rnn_hf.utils import continuation_table

    tok = teacher.tokenizer
    text = "unbelievably searchable, tf2rnn!"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    batch = TrajectoryCollator(continues_word=continuation_table(tok))(
        [{"input_ids": ids, "trajectory": [[0.0] * 4], "target_steps": [len(ids)]},
         {"input_ids": ids[:2], "trajectory": [[0.0] * 4], "target_steps": [2]}])
    words = tok(text, add_special_tokens=False).word_ids()  # BERT's pre-tokenizer words: punctuation apart
    begins = [int(i == 0 or words[i] != words[i - 1]) for i in range(len(ids))]
    assert 0 in begins and batch["word_starts"][0].tolist() == begins
    assert batch["word_starts"][1].tolist() == begins[:2] + [0] * (len(ids) - 2)  # padding begins nothing
    assert "word_starts" not in TrajectoryCollator()([{"input_ids": ids, "trajectory": [[0.0] * 4],
                                                       "target_steps": [1]}])


def test_loss_pieces_by_hand():
    a = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), dim=-1)
    b = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert torch.allclose(distance(a, b, "cosine"), torch.tensor([0.0, 1 - 2 ** -0.5]))
    assert torch.allclose(distance(a, b, "mse"), 2 * distance(a, b, "cosine") / 2)
    w = position_weights(torch.ones(2, 3), torch.tensor([[1, 1, 1], [1, 1, 0]]), 4.0)
    assert w.tolist() == [[1, 1, 4], [1, 4, 1]]
    s = SimilarityLoss()(torch.eye(3), torch.eye(3))
    assert float(s) == 0.0
    schedule = LossSchedule(transition_until=0.2, anneal=0.4, restart_prob=0.5)
    assert [schedule.transition_weight(p) for p in (0.1, 0.4, 0.7)] == [1.0, 0.5, 0.0]
    assert schedule.restart(0.2) == 0.5 and schedule.restart(1.0) == 0.0


def test_transition_is_one_step_and_rollout_is_free_running(teacher, data):
    model, tok = _student(teacher, state_lift=True)
    batch = TrajectoryCollator(tok.pad_token_id)([data[0][i] for i in range(4)])
    # Teacher forcing sees the teacher's previous state: changing a target changes the next prediction only.
    forced = model(batch["input_ids"], attention_mask=batch["attention_mask"], teacher_states=batch["targets"])
    poked = batch["targets"].clone()
    poked[:, 2] = torch.nn.functional.normalize(torch.randn_like(poked[:, 2]), dim=-1)
    forced2 = model(batch["input_ids"], attention_mask=batch["attention_mask"], teacher_states=poked)
    diff = (forced.last_hidden_state - forced2.last_hidden_state).abs().amax(-1)
    assert diff[:, :3].max() == 0 and diff[:, 3].min() > 0 and diff[:, 4].max() == 0
    # Forcing at no step is the free-running model.
    none = model(batch["input_ids"], attention_mask=batch["attention_mask"], teacher_states=batch["targets"],
                 teacher_forcing=torch.zeros_like(batch["attention_mask"]))
    free = model(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    mask = batch["attention_mask"].bool()
    assert torch.allclose(none.last_hidden_state[mask], free[mask], atol=1e-5)
    # Forcing every step in the step loop equals the parallel path.
    every = torch.ones_like(batch["attention_mask"])
    every[0, -1] = 0  # leaves the parallel path
    loop = model(batch["input_ids"], attention_mask=batch["attention_mask"], teacher_states=batch["targets"],
                 teacher_forcing=every).last_hidden_state
    same = mask.clone()
    same[0, -1] = False
    assert torch.allclose(loop[same], forced.last_hidden_state[same], atol=1e-5)
    assert TransitionLoss()(model, batch) > 0
    loss, preds = RolloutLoss(tbptt=3)(model, batch)
    assert torch.allclose(preds[mask], free[mask], atol=1e-5) and loss > 0


def test_thinned_block_middles_keep_block_and_row_ends_and_the_loss_in_expectation():
    mask = torch.tensor([[1] * 20, [0] * 4 + [1] * 16])  # the second row left-padded: places count real steps
    torch.manual_seed(0)
    draws = torch.stack([thin_block_middles(mask.float(), mask, 8, 0.25) for _ in range(4000)])
    place, real = torch.cumsum(mask, 1) - 1, mask.bool()
    ends = real & ((place % 8 == 7) | (place == mask.sum(1, keepdim=True) - 1))
    middles = real & ~ends
    assert ends.sum() == 5 and bool((draws[:, ends] == 1).all()) and bool((draws[:, ~real] == 0).all())
    assert set(draws[:, middles].unique().tolist()) == {0.0, 4.0}  # dropped, or kept at 1 / 0.25
    assert float((draws.mean(0)[middles] - 1).abs().max()) < 0.15  # the full loss's weights in expectation


def test_rollout_on_a_share_of_block_middles_is_the_full_models_loss_on_those_steps():
    model = tiny_model("tova-open", num_slots=32, open_tokens=4)
    ids = torch.randint(2, 50, (3, 14))
    mask = torch.ones_like(ids)
    mask[1, 9:] = mask[2, 5:] = 0
    targets = torch.nn.functional.normalize(torch.randn(3, 14, 16), dim=-1)
    tmask = mask.float().clone()
    tmask[:, ::3] = 0  # a sparse trajectory, as --stride gives
    batch = dict(input_ids=ids, attention_mask=mask, targets=targets, target_mask=tmask)
    thinned = RolloutLoss(final_weight=4.0, open_tokens=4, open_middle_fraction=0.5)
    torch.manual_seed(1)
    loss, _ = thinned(model.train(), batch)
    torch.manual_seed(1)
    weights = thin_block_middles(tmask, mask, 4, 0.5)
    assert bool(((weights == 0) & (tmask > 0)).any()) and bool((weights == 2).any())
    # The packed parallel form, reading only the kept steps, gives what the whole recomputation gives there.
    full = model(ids, attention_mask=mask).last_hidden_state
    expected = weighted_mean(distance(full, targets), position_weights(weights, mask, 4.0))
    assert torch.allclose(loss, expected, atol=1e-5)
    everything, _ = RolloutLoss(final_weight=4.0)(model, batch)
    assert torch.allclose(thinned(model.eval(), batch)[0], everything, atol=1e-6)  # evaluation reads every target
    with pytest.raises(ValueError, match="open_tokens 1"):
        RolloutLoss(open_middle_fraction=0.5)


def test_transition_schedule_needs_a_lift(teacher, data, tmp_path):
    model, tok = _student(teacher)
    args = DistillationTrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, transition_until=0.5)
    with pytest.raises(ValueError, match="state_lift=True"):
        DistillationTrainer(model=model, args=args, train_dataset=data[0], data_collator=TrajectoryCollator())


def test_tiny_run_lowers_held_out_loss(teacher, data, tmp_path):
    model, tok = _student(teacher, state_lift=True)
    args = DistillationTrainingArguments(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, max_steps=40, per_device_train_batch_size=8,
        per_device_eval_batch_size=16, learning_rate=3e-3, remove_unused_columns=False, save_strategy="no",
        logging_steps=10, seed=0, disable_tqdm=True, transition_until=0.25, anneal=0.25, restart_prob=0.2,
        similarity_weight=0.5, neighbour_weight=0.5, neighbour_bank=20)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0], eval_dataset=data[1],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    assert trainer.neighbour.bank.shape == (20, 384)
    before = trainer.evaluate()
    trainer.train()
    after = trainer.evaluate()
    assert after["eval_loss"] < before["eval_loss"]
    assert after["eval_final_cosine"] > before["eval_final_cosine"]
    assert {"eval_prefix_cosine", "eval_neighbour_agreement@10"} <= set(after)
    logged = [h for h in trainer.state.log_history if "loss_transition" in h or "loss_rollout" in h]
    assert any("loss_transition" in h for h in logged) and any("loss_rollout" in h for h in logged)
    assert any("loss_neighbour" in h for h in logged)


def test_freeze_embeddings_keeps_the_table_and_trains_the_rest(teacher, data, tmp_path):
    model, tok = _student(teacher)
    table, rest = model.get_input_embeddings().weight.detach().clone(), model.readout.weight.detach().clone()
    args = DistillationTrainingArguments(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, max_steps=3, per_device_train_batch_size=8,
        learning_rate=1e-2, remove_unused_columns=False, save_strategy="no", seed=0, disable_tqdm=True,
        freeze_embeddings=True)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    trainer.train()
    assert torch.equal(model.get_input_embeddings().weight, table)
    assert not torch.equal(model.readout.weight, rest)
    table = model.get_input_embeddings().weight
    assert all(p is not table for group in trainer.optimizer.param_groups for p in group["params"])


def test_sparse_embeddings_train_only_the_rows_read(teacher, data, tmp_path):
    """`--sparse_embeddings` under the CPU's bf16 autocast: a row-sparse gradient and lazy AdamW for the table
    (rows no batch read stay the teacher's), the dense update for the layer, a finite clipped norm; the loss falls."""
    torch.manual_seed(0)
    model, tok = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=8)
    table = model.get_input_embeddings().weight.detach().clone()
    args = DistillationTrainingArguments(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=True, max_steps=6, per_device_train_batch_size=8,
        learning_rate=1e-3, remove_unused_columns=False, save_strategy="no", logging_steps=1, seed=0,
        disable_tqdm=True, sparse_embeddings=True, max_grad_norm=0.5)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    grads = []

    class _Grads(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            grad = model.get_input_embeddings().weight.grad
            grads.append((grad.is_sparse, grad.coalesce().indices().shape[1] if grad.is_sparse else len(grad)))

    trainer.add_callback(_Grads())
    trainer.train()
    assert len(grads) == 6 and all(sparse and 0 < rows < 200 for sparse, rows in grads)  # of 30,522
    assert isinstance(trainer.optimizer.optimizer, RowSparseAdamW)  # inside accelerate's wrapper
    assert not model.get_input_embeddings().sparse  # a sparse gradient only while the trainer trains
    read = torch.zeros(len(table), dtype=torch.bool)
    read[torch.as_tensor(np.concatenate([np.asarray(ids) for ids in data[0]["input_ids"]]))] = True
    after = model.get_input_embeddings().weight.detach()
    assert torch.equal(after[~read], table[~read])
    assert (after[read] != table[read]).any(dim=1).float().mean() > 0.9  # nearly every row read has moved
    history = [h for h in trainer.state.log_history if "loss" in h]
    assert len(history) == 6 and history[-1]["loss"] < history[0]["loss"]
    assert all(np.isfinite(h["grad_norm"]) and h["grad_norm"] > 0 for h in history)


def _rounded_run(teacher, data, out, resume=None, weight_scale="max", weight_keep=(), weight_group=None, **config):
    """A one-layer inherited student (or as `config` says) trained 4 steps under --weight_bits 4, a checkpoint
    every 2."""
    torch.manual_seed(0)
    model, tok = build_student(teacher, cell_type="tova_attention", **{"num_hidden_layers": 1, **config}, num_slots=8)
    args = DistillationTrainingArguments(
        output_dir=str(out), report_to=[], use_cpu=True, max_steps=4, per_device_train_batch_size=8,
        learning_rate=1e-3, remove_unused_columns=False, save_strategy="steps", save_steps=2, seed=0,
        disable_tqdm=True, weight_bits=4, weight_scale=weight_scale, weight_keep=list(weight_keep),
        weight_group=weight_group)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    linears = {n: m for n, m in model.named_modules() if parametrize.is_parametrized(m, "weight")}
    assert linears and all(isinstance(m, torch.nn.Linear) for m in linears.values())
    before = {n: m.parametrizations.weight.original.detach().clone() for n, m in linears.items()}
    scales = {n: m.parametrizations.weight[0].scale.detach().clone() for n, m in linears.items()
              if weight_scale == "learned"}
    trainer.train(resume_from_checkpoint=resume)
    assert all(not torch.equal(m.parametrizations.weight.original, before[n]) for n, m in linears.items())
    assert all(not torch.equal(linears[n].parametrizations.weight[0].scale, s) for n, s in scales.items())
    return trainer, tok, linears


@pytest.mark.parametrize("weight_scale", ["max", "learned"])
def test_weight_bits_trains_through_int4_saves_the_rounded_student_and_resumes(teacher, data, tmp_path, weight_scale):
    """`--weight_bits 4`: an inherited student trains on its linear weights rounded per row (the latent weights move);
    the saved student holds the rounded ones under their plain names, so that its plain forward, reloaded, is the one
    that was trained; a checkpoint holds the latent ones (and learned scales), and training resumed from it ends where
    it would have."""
    trainer, tok, linears = _rounded_run(teacher, data, tmp_path / "run", weight_scale=weight_scale)
    trainer.save_model(str(tmp_path / "student"))
    saved = TF2RNNModel.from_pretrained(tmp_path / "student").eval()
    assert "readout" not in linears  # the readout stays fp32, as it trained
    for name, m in saved.named_modules():
        if name in linears:
            assert torch.equal(m.weight, linears[name].weight)  # the rounded values, under the plain name
            assert torch.allclose(round_weight(m.weight, 4), m.weight, atol=1e-6, rtol=0)  # on the int4 grid already
    assert not torch.allclose(round_weight(saved.readout.weight, 4), saved.readout.weight, atol=1e-6, rtol=0)
    ids = torch.tensor([tok("The quiet river flows near the bridge.")["input_ids"]])
    trainer.model.eval()
    with torch.no_grad():
        assert torch.allclose(saved(ids).pooler_output, trainer.model(ids).pooler_output, atol=1e-6)
    # Resumed from step 2's checkpoint (whose latent weights a missed load would leave at the inherited ones).
    _, _, resumed = _rounded_run(teacher, data, tmp_path / "resumed", resume=tmp_path / "run" / "checkpoint-2",
                                 weight_scale=weight_scale)
    for name, m in linears.items():
        assert torch.equal(resumed[name].parametrizations.weight.original, m.parametrizations.weight.original)
        assert torch.equal(resumed[name].weight, m.weight)  # the learned scales too
    for name, m in saved.named_modules():  # on the one-scale-a-row grid the fused step reads as int4
        if name in linears:
            assert quantize_rows4(m.weight) is not None
    with pytest.raises(ValueError, match="pass --weight_bits too"):
        DistillationTrainingArguments(output_dir=str(tmp_path), weight_scale="learned")
    with pytest.raises(ValueError, match="'max' or 'learned'"):
        DistillationTrainingArguments(output_dir=str(tmp_path), weight_bits=4, weight_scale="mse")
    with pytest.raises(ValueError, match="pass --weight_bits too"):
        DistillationTrainingArguments(output_dir=str(tmp_path), weight_group=32)
    with pytest.raises(ValueError, match="2..8-bit"):
        DistillationTrainingArguments(output_dir=str(tmp_path), weight_bits=16)


@pytest.mark.parametrize("weight_scale", ["max", "learned"])
def test_weight_group_128_saves_a_student_the_fused_step_reads_as_int4_with_a_scale_per_128_columns(
        teacher, data, tmp_path, weight_scale):
    """`--weight_group 128`: each 128 columns of a row train on their own int4 grid; the saved student is on that grid
    and not on one scale a row, and its fused step reads every layer product as int4 with those scales (on a CPU with
    int4 products): naive.py's arithmetic, near its fp32 forward (0.988-0.993 cosine here, int8 activations)."""
    trainer, tok, linears = _rounded_run(teacher, data, tmp_path / "run", weight_scale=weight_scale, weight_group=128)
    trainer.save_model(str(tmp_path / "student"))
    saved = TF2RNNModel.from_pretrained(tmp_path / "student").eval()
    for name, m in saved.named_modules():
        if name in linears:
            assert torch.allclose(round_weight(m.weight, 4, 128), m.weight, atol=1e-6, rtol=0)
            assert not torch.allclose(round_weight(m.weight, 4), m.weight, atol=1e-6, rtol=0)
            codes, scale, _ = quantize_rows4(m.weight)
            assert scale.shape == (m.weight.shape[0], m.weight.shape[1] // 128)
    step = Int8TOVAStep(saved)
    int4 = step.lib.tf2rnn_int4_products()
    assert step.int4 == step.int4_groups == (("qkv", "out", "up", "down") if int4 else ())
    ids = tok("The quiet river flows near the bridge.")["input_ids"]
    state, plain, ref = saved.init_state(1), saved.init_state(1), saved.init_state(1)
    with torch.no_grad():
        for token in ids:
            fused, state = step(torch.tensor([token]), state)
            fp32, plain = saved.step(torch.tensor([token]), plain)
            naive, ref = int8_tova_step(saved, token, ref)
            assert (fused - naive).abs().max() <= 1e-4  # the kernel computes naive.py's block-scaled arithmetic
            assert torch.nn.functional.cosine_similarity(fused, fp32).item() >= 0.98  # int8 activations' noise


def test_weight_keep_leaves_a_product_unrounded_and_the_fused_step_reads_it_as_int8(teacher, data, tmp_path):
    """`--weight_keep down`: every layer's feed-forward output trains unrounded, the other products through int4; the
    saved student's fused step then reads qkv, out and up as int4 and down as int8 (on a CPU with int4 products)."""
    trainer, tok, linears = _rounded_run(teacher, data, tmp_path / "run", weight_keep=("down",))
    assert linears and not any(name.endswith("down") for name in linears)
    assert {name.rsplit(".", 1)[-1] for name in linears} == {"query", "key", "value", "out", "up"}
    trainer.save_model(str(tmp_path / "student"))
    saved = TF2RNNModel.from_pretrained(tmp_path / "student").eval()
    step = Int8TOVAStep(saved)
    assert step.int4 == (("qkv", "out", "up") if step.lib.tf2rnn_int4_products() else ())
    assert quantize_rows4(saved.cell.layers[0].down.weight) is None  # trained in fp32: off the grid
    with pytest.raises(ValueError, match="match no linear layer"):  # a misspelt name would round what it meant to keep
        _rounded_run(teacher, data, tmp_path / "typo", weight_keep=("dwon",))
    with pytest.raises(ValueError, match="pass --weight_bits too"):
        DistillationTrainingArguments(output_dir=str(tmp_path), weight_keep=["down"])
    with pytest.raises(ValueError, match="Keep all three or none"):
        DistillationTrainingArguments(output_dir=str(tmp_path), weight_bits=4, weight_keep=["query", "key"])


def test_weight_keep_by_layer_leaves_a_words_layer_int8_and_the_keystrokes_int4(teacher, data, tmp_path):
    """`--weight_keep cell.layers.1` on a two-layer student whose keystrokes run one layer (--tail_layers 1): the
    word's layer trains unrounded, and the saved student's fused step reads it as int8 and the keystroke's as int4."""
    trainer, tok, linears = _rounded_run(teacher, data, tmp_path / "run", weight_keep=("cell.layers.1",),
                                         num_hidden_layers=2, tail_layers=1)
    assert {name.rsplit(".", 1)[0] for name in linears} == {"cell.layers.0"}
    trainer.save_model(str(tmp_path / "student"))
    step = Int8TOVAStep(TF2RNNModel.from_pretrained(tmp_path / "student").eval())
    int4 = (0,) if step.lib.tf2rnn_int4_products() else ()
    assert step.int4_layers == {name: int4 for name in ("qkv", "out", "up", "down")}


@pytest.mark.parametrize("bad, message", [({"freeze_embeddings": True}, "frozen token table"),
                                          ({"fp16": True}, "fp16"), ({"optim": "sgd"}, "not AdamW")])
def test_sparse_embeddings_refuse_what_they_cannot_do(teacher, data, tmp_path, bad, message):
    model, tok = _student(teacher)
    with pytest.raises(ValueError, match=message):
        args = DistillationTrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, max_steps=1,
                                             remove_unused_columns=False, sparse_embeddings=True, **bad)
        DistillationTrainer(model=model, args=args, train_dataset=data[0],
                            data_collator=TrajectoryCollator(tok.pad_token_id))


def test_time_budget_progress_shows_minutes_not_a_billion_steps(teacher, data, tmp_path, capfd):
    model, tok = _student(teacher)
    args = DistillationTrainingArguments(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, train_minutes=0.03, per_device_train_batch_size=8,
        remove_unused_columns=False, save_strategy="no", logging_steps=1, seed=0)  # a loaded machine may fit one step
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    assert any(isinstance(c, TimeBudgetProgressCallback) for c in trainer.callback_handler.callbacks)
    metrics = trainer.train().metrics
    captured = capfd.readouterr()
    err = captured.err
    assert "1000000000" not in err
    # Throughput from the steps taken, both where the Trainer prints it and in what train() returns.
    printed = re.findall(r"'train_samples_per_second': '([\d.e+]+)'", captured.out)
    samples = trainer.state.global_step * 8 / metrics["train_runtime"]
    assert printed and float(printed[-1]) == pytest.approx(samples, rel=1e-2)
    assert metrics["train_samples_per_second"] == pytest.approx(samples, rel=1e-3)
    # What transformers 5.17 passed to log() after such a run (samples from max_steps): corrected in place.
    logs = {"train_runtime": 2.0, "train_samples_per_second": 7.4e8, "train_steps_per_second": 9.2e7}
    trainer.log(logs)
    assert logs["train_samples_per_second"] == pytest.approx(trainer.state.global_step * 8 / 2.0, rel=1e-3)
    assert logs["train_steps_per_second"] == pytest.approx(trainer.state.global_step / 2.0, rel=1e-3)
    bar = re.findall(r"train +(\d+)%\|.*?\| (\d\d:\d\d) of 00:01, (\d\d:\d\d) left, step (\d+), ([\d.]+) "
                     r"samples/s", err)  # a budget of 1.8 s
    assert bar and bar[-1][:3] == ("100", "00:01", "00:00")
    assert int(bar[-1][3]) == trainer.state.global_step > 0 and float(bar[-1][4]) > 0
    assert re.search(r"\{'loss': '[\d.]+'", captured.out)  # the Trainer's logs still print (tqdm.write)


def test_group_by_length_batches_like_lengths_without_decoding_rows(teacher, data, tmp_path):
    import datasets

    model, tok = _student(teacher)
    rows = datasets.concatenate_datasets([data[0]] * 4)  # enough rows for the sampler's 50-batch groups
    padded = {}
    for strategy in ("random", "group_by_length"):
        args = DistillationTrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True,
                                             remove_unused_columns=False, per_device_train_batch_size=2,
                                             train_sampling_strategy=strategy, seed=0)
        trainer = DistillationTrainer(model=model, args=args, train_dataset=rows,
                                      data_collator=TrajectoryCollator(tok.pad_token_id))
        if strategy == "group_by_length":  # the Trainer reads this column instead of every row
            assert list(trainer.train_dataset["length"]) == [len(ids) for ids in rows["input_ids"]]
            # ... and the sampler sorts plain ints: datasets' lazy column would read a row per index, each epoch.
            sampler = trainer._get_train_sampler()
            assert sampler.lengths == [len(ids) for ids in rows["input_ids"]]
            with mock.patch.object(datasets.Dataset, "__getitem__", side_effect=AssertionError("read a row")):
                assert sorted(sampler) == list(range(len(rows)))
        batches = list(trainer.get_train_dataloader())
        assert sum(len(b["input_ids"]) for b in batches) == len(rows)
        padded[strategy] = sum(int((1 - b["attention_mask"]).sum()) for b in batches)
    assert padded["group_by_length"] < padded["random"] / 2


def test_the_trainer_reads_rows_as_arrays_into_the_same_batches(teacher, data, tmp_path):
    """The DataLoader fetches rows with `__getitems__`: as numpy arrays (not lists of Python floats, which cost
    twice the time), collated into exactly the batches the plain rows make."""
    model, tok = _student(teacher)
    args = DistillationTrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True,
                                         remove_unused_columns=False, per_device_train_batch_size=4, seed=0)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    assert trainer.train_dataset.format["type"] == "numpy" and data[0].format["type"] is None
    collate, picks = TrajectoryCollator(tok.pad_token_id), [[0, 5, 2, 9], [len(data[0]) - 1, 1]]
    for pick in picks:
        fetched = trainer.train_dataset.__getitems__(pick)
        assert isinstance(fetched[0]["trajectory"], np.ndarray)
        plain, arrays = collate([data[0][i] for i in pick]), collate(fetched)
        assert plain.keys() == arrays.keys() and all(torch.equal(plain[k], arrays[k]) for k in plain)


def test_bf16_on_cpu_trains(teacher, data, tmp_path):
    """`--bf16` on a CPU: the Trainer's autocast around an inherited student's loss; the loss falls, stays finite."""
    torch.manual_seed(0)
    model, tok = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=8)
    args = DistillationTrainingArguments(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=True, max_steps=6, per_device_train_batch_size=8,
        learning_rate=1e-3, remove_unused_columns=False, save_strategy="no", logging_steps=1, seed=0,
        disable_tqdm=True)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=data[0],
                                  data_collator=TrajectoryCollator(tok.pad_token_id))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 6 and all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 weights; bf16 only inside the step


def test_neighbour_loss_teaches_the_teachers_neighbours(data):
    from tf2rnn_hf.distill.losses import NeighbourLoss, teacher_bank
    from tf2rnn_hf.evaluation.scores import neighbour_agreement

    bank = teacher_bank(data[0], size=1000, seed=0)
    finals = torch.stack([torch.tensor(t[-1]) for t in data[0]["trajectory"]])
    assert len(bank) == len(finals) and torch.allclose(bank.norm(dim=-1), torch.ones(len(bank)))
    assert {tuple(r.tolist()) for r in bank.round(decimals=4)} == {tuple(r.tolist()) for r in
                                                                  torch.nn.functional.normalize(finals, dim=-1)
                                                                  .round(decimals=4)}
    # Clustered "teacher" embeddings, a noisy "student": the loss is zero only at the teacher, finite
    # with each text's own entry in the bank, and descending it recovers the teacher's neighbours.
    g = torch.Generator().manual_seed(0)
    centres = torch.nn.functional.normalize(torch.randn(20, 32, generator=g), dim=-1)
    teacher_emb = torch.nn.functional.normalize(centres.repeat(10, 1) + 0.3 * torch.randn(200, 32, generator=g), dim=-1)
    loss = NeighbourLoss(teacher_emb, temperature=0.05)
    assert float(loss(teacher_emb, teacher_emb)) < 1e-5
    student = (teacher_emb + 0.5 * torch.randn(200, 32, generator=g)).requires_grad_()
    before = neighbour_agreement(student.detach(), teacher_emb)
    opt = torch.optim.Adam([student], lr=1e-2)
    for _ in range(100):
        opt.zero_grad()
        value = loss(student, teacher_emb)
        value.backward()
        assert torch.isfinite(student.grad).all()
        opt.step()
    assert neighbour_agreement(student.detach(), teacher_emb) > before + 0.2
    with pytest.raises(ValueError, match="temperature must be positive"):
        NeighbourLoss(teacher_emb, temperature=0)


@pytest.fixture(scope="module")
def char_data(teacher, tmp_path_factory):
    settings = trajectories.TrajectorySettings(prefix_unit="char", bf16=False, max_tokens=16, shard_size=64)
    cache = tmp_path_factory.mktemp("char")
    train = trajectories.load(trajectories.generate(TEXTS[:30], teacher, settings, cache, progress=False))
    held = trajectories.load(trajectories.generate(TEXTS[30:], teacher, settings, cache, progress=False))
    return train, held


def test_keystroke_batch_is_what_the_stream_runs(teacher, data, char_data):
    from tf2rnn_hf.inference.streaming import StreamingEncoder

    model, tok = _student(teacher)
    rows = [char_data[0][i] for i in range(4)]
    batch = KeystrokeCollator(tok.pad_token_id, partials_per_text=100)(rows)
    # Whole-token keystrokes become the token batch, with the token trajectory's targets.
    token_batch = TrajectoryCollator(tok.pad_token_id)([data[0][i] for i in range(4)])
    both = (batch["target_mask"] > 0) & (token_batch["target_mask"] > 0)
    assert both.sum() >= 0.8 * token_batch["target_mask"].sum()
    assert (batch["targets"][both] - token_batch["targets"][both]).abs().max() < 2e-3  # fp16 storage
    # Keystrokes inside a word: the partial word's own tokens after the finished words, as typed.
    partial = sum(sum(s < len(p) for s, p in zip(r["shared_tokens"], r["char_input_ids"])) for r in rows)
    assert len(batch["keystroke_ids"]) == partial > 0
    with torch.no_grad():
        run = model(batch["keystroke_ids"], attention_mask=batch["keystroke_mask"]).pooler_output
    typed = []
    for row in rows:
        enc = StreamingEncoder(model, tok)
        for c, ids in zip(row["char_ends"], row["char_input_ids"]):
            enc.type(row["text"][len(enc.text):c])
            if list(ids) != row["input_ids"][:len(ids)]:
                typed.append(enc.embedding)
    assert (torch.stack(typed) - run).abs().max() <= 1e-5


def test_keystroke_loss_improves_keystroke_fidelity(teacher, char_data, tmp_path):
    from tf2rnn_hf.evaluation import keystroke_fidelity

    model, tok = _student(teacher)
    args = DistillationTrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, max_steps=30,
                                         per_device_train_batch_size=8, learning_rate=3e-3,
                                         remove_unused_columns=False, save_strategy="no", logging_steps=10, seed=0,
                                         disable_tqdm=True, keystroke_weight=1.0)
    trainer = DistillationTrainer(model=model, args=args, train_dataset=char_data[0],
                                  data_collator=KeystrokeCollator(tok.pad_token_id))
    before = keystroke_fidelity(model, char_data[1])["student"]["keystroke_cosine"]
    trainer.train()
    after = keystroke_fidelity(model, char_data[1])["student"]["keystroke_cosine"]
    assert after > before + 0.05
    assert any("loss_keystroke" in h for h in trainer.state.log_history)


def test_keystroke_loss_needs_char_trajectories():
    from tf2rnn_hf.distill.recipe import main

    with pytest.raises(ValueError, match="--prefix_unit char"):
        main(["--keystroke_weight", "1", "--output_dir", "unused", "--report_to", "none"])


@pytest.mark.parametrize("name", presets())
def test_every_shipped_preset_parses_into_the_values_it_names(name):
    """A preset is only read when a user runs it: a misspelt key or a value of the wrong type must fail here."""
    groups = parse(["--preset", name])
    parsed = {k: v for group in groups for k, v in asdict(group).items()}
    for key, value in json.loads((PRESETS_DIR / f"{name}.json").read_text()).items():
        got = getattr(parsed[key], "value", parsed[key])  # transformers' enums (save_strategy, ...)
        if key == "report_to" and value == "none":
            value = []  # TrainingArguments' spelling of "no integrations"
        assert got == value, (key, value, got)


@pytest.mark.parametrize("native", [True, False])
def test_cpu_training_defaults_to_bf16_where_the_cpu_computes_it_natively(native):
    """On a CPU with native bf16 (AMX, AVX512-BF16) the recipe trains under bf16 autocast unless told otherwise;
    elsewhere bf16 is emulated and slower, so it stays off."""
    with mock.patch("tf2rnn_hf.distill.recipe.fast_bf16", return_value=native), \
            mock.patch("torch.cuda.is_available", return_value=False):
        assert parse(["--preset", "quick"])[3].bf16 is native
        assert parse(["--preset", "quick", "--bf16", "false"])[3].bf16 is False
        assert parse(["--preset", "quick", "--bf16=false"])[3].bf16 is False
        assert parse(["--preset", "quick", "--bf16", "true"])[3].bf16 is True


DATA = ROOT / "tests" / "fixtures"


def _distill_args(out, cache, *extra):
    # Small local text keeps these runs to seconds; the offline corpus path is tested in test_corpus.py.
    return ["--preset", "tiny", "--corpus", str(DATA / "train.txt"), "--eval_corpus", str(DATA / "heldout.txt"),
            "--output_dir", str(out), "--cache_dir", str(cache), "--report_to", "none", "--seed", "7",
            "--disable_tqdm", "true", *extra]


def test_byte_student_distills_saves_and_loads(tmp_path):
    """The whole path for a byte-level student: char trajectories -> byte rows -> training -> a folder that
    AutoModel/AutoTokenizer and sentence-transformers load, and that streams per character."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from tf2rnn_hf.distill.recipe import main
    from tf2rnn_hf.evaluation.suites import student_encoder
    from tf2rnn_hf.inference.streaming import keystroke_embeddings

    out = tmp_path / "byte"
    results = main(_distill_args(out, tmp_path / "cache", "--granularity", "byte", "--use_cpu", "true",
                                 "--save_strategy", "no"))
    assert set(results["fidelity"]) == {"student", "teacher"}  # token baselines do not apply to bytes
    assert results["fidelity"]["teacher"]["final_cosine"] > 0.999
    model, tok = AutoModel.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out)
    assert model.config.granularity == "byte" and type(tok).__name__ == "ByT5Tokenizer"
    texts = ["Café au lait", "search as you type"]
    ours = student_encoder(model, tok)(texts)
    theirs = SentenceTransformer(str(out), device="cpu").encode(texts, convert_to_tensor=True)
    assert (ours - theirs).abs().max() <= 1e-5
    assert (keystroke_embeddings(model, tok, texts[0])[-1] - ours[0]).abs().max() <= 1e-5


def test_inherited_student_improves_on_the_causal_teacher_and_loads_everywhere(tmp_path):
    """The teacher-inherited student through the recipe: it starts as the teacher made causal, training on
    the trajectories moves it closer to the teacher on held-out text, and the saved folder loads with
    AutoModel and sentence-transformers alike."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from tf2rnn_hf.data import trajectories
    from tf2rnn_hf.data.teacher import Teacher
    from tf2rnn_hf.distill import build_student
    from tf2rnn_hf.distill.recipe import main
    from tf2rnn_hf.evaluation.fidelity import fidelity_table
    from tf2rnn_hf.evaluation.suites import student_encoder

    out = tmp_path / "inherited"
    results = main(_distill_args(out, tmp_path / "cache", "--cell_type", "tova_attention", "--hidden_size", "384",
                                 "--num_hidden_layers", "2", "--learning_rate", "2e-4", "--max_steps", "12",
                                 "--use_cpu", "true", "--save_strategy", "no"))
    model, tok = AutoModel.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out)
    assert model.config.cell_type == "tova_attention" and model.config.num_hidden_layers == 2
    teacher = Teacher()
    untrained, _ = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2)
    texts = (DATA / "heldout.txt").read_text().splitlines()[:32]
    held_out = trajectories.build(texts, teacher, trajectories.TrajectorySettings(max_tokens=16),
                                  tmp_path / "cache")
    before = fidelity_table(untrained.eval(), held_out, teacher, baselines=False)["student"]
    after = fidelity_table(model, held_out, teacher, baselines=False)["student"]
    assert after["prefix_cosine"] > before["prefix_cosine"], (before, after)
    assert abs(after["final_cosine"] - results["fidelity"]["student"]["final_cosine"]) < 0.05
    ours = student_encoder(model, tok)(texts[:4])
    theirs = SentenceTransformer(str(out), device="cpu").encode(texts[:4], convert_to_tensor=True)
    assert (ours - theirs).abs().max() <= 1e-5


def test_a_local_corpus_alone_is_scored_on_texts_held_out_of_it(tmp_path):
    """`--corpus FILE` without --eval_corpus used to score the student on the file's first texts, which it had trained
    on; now a stable hash holds some out of training, as the built-in corpus's split does, and those are scored."""
    from tf2rnn_hf.data.corpus import load_texts
    from tf2rnn_hf.distill.recipe import main

    own = tmp_path / "own.txt"
    own.write_text((DATA / "train.txt").read_text() + (DATA / "heldout.txt").read_text())
    held = list(load_texts(str(own), "heldout", hold_out=True)["text"])
    assert held and not set(held) & set(load_texts(str(own), "train", hold_out=True)["text"])

    def args(out, corpus):
        return ["--preset", "tiny", "--corpus", str(corpus), "--output_dir", str(tmp_path / out), "--cache_dir",
                str(tmp_path / "cache"), "--report_to", "none", "--disable_tqdm", "true", "--max_steps", "1",
                "--use_cpu", "true", "--save_strategy", "no"]

    results = main(args("own", own))
    assert results["held_out_texts"] == len(held) and results["fidelity"]["student"]["final_cosine"] > 0
    card = (tmp_path / "own" / "README.md").read_text()
    assert "`own.txt`, the distiller's own text (2% of its texts held out" in card and "WordNet" not in card
    few = tmp_path / "few.txt"
    few.write_text("".join(t + "\n" for t in load_texts(str(own), "train", hold_out=True)["text"][:5]))
    with pytest.raises(ValueError, match="No held-out texts in .*few.txt.*--eval_corpus"):
        main(args("few", few))


def test_parent_weight_moves_the_training_targets_to_the_frozen_parent(teacher, data, tmp_path):
    """`parent_weight` w: in training the free-running loss reads normalise((1 - w) teacher + w parent), the parent's
    trajectory from the same batch; evaluation reads the teacher's alone, and the parent never trains."""
    import copy

    torch.manual_seed(0)
    model, tok = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, num_slots=8)
    parent = copy.deepcopy(model)
    saved = {k: v.clone() for k, v in parent.state_dict().items()}

    def trainer(weight, parent=None, **kw):
        args = DistillationTrainingArguments(
            output_dir=str(tmp_path), report_to=[], use_cpu=True, max_steps=3, per_device_train_batch_size=8,
            learning_rate=1e-3, remove_unused_columns=False, save_strategy="no", seed=0, disable_tqdm=True,
            parent_weight=weight, **kw)
        return DistillationTrainer(model=model, args=args, train_dataset=data[0], parent=parent,
                                   data_collator=TrajectoryCollator(tok.pad_token_id))

    batch = TrajectoryCollator(tok.pad_token_id)([data[0][i] for i in range(8)])
    with torch.no_grad():
        own = model(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    weights = position_weights(batch["target_mask"], batch["attention_mask"], 1.0)

    def loss_to(target):
        return float(weighted_mean(distance(own, target), weights))

    to_teacher = loss_to(batch["targets"])
    mixed = torch.nn.functional.normalize(0.7 * batch["targets"] + 0.3 * own, dim=-1)
    for weight, expected in ((1.0, 0.0), (0.3, loss_to(mixed)), (0.0, to_teacher)):
        t = trainer(weight, parent if weight else None)
        with torch.no_grad():
            assert abs(float(t.compute_loss(model.train(), batch)) - expected) < 1e-5, weight
            assert abs(float(t.compute_loss(model.eval(), batch)) - to_teacher) < 1e-5  # evaluation: the teacher's
    assert to_teacher > 0.05 and 0.01 < loss_to(mixed) < to_teacher - 0.05
    # The intended use: an int4 stage pulled to its unrounded parent, which stays as it was.
    t = trainer(0.5, parent, weight_bits=4)
    t.train()
    assert all(torch.equal(v, saved[k]) for k, v in parent.state_dict().items())
    assert all(not p.requires_grad for p in parent.parameters()) and not parent.training
    with pytest.raises(ValueError, match="parent_weight 0.5 with no parent"):
        trainer(0.5)
    with pytest.raises(ValueError, match="parent_weight 0.0 with a parent"):
        trainer(0.0, parent)
    with pytest.raises(ValueError, match=r"parent_weight is a share of the targets, in \[0, 1\]; got 1.5"):
        trainer(1.5, parent)


def test_parent_weight_through_the_recipe_continues_from_init_from(tmp_path):
    """`--parent_weight` loads the --init_from student a second time, frozen, as the parent; without --init_from there
    is none to load, and the recipe says so before any work."""
    from tf2rnn_hf.distill.recipe import main

    def run(out, *extra):
        return main(_distill_args(tmp_path / out, tmp_path / "cache", "--max_steps", "2", "--use_cpu", "true",
                                  "--save_strategy", "no", "--max_eval_texts", "4", *extra))

    base = ("--cell_type", "tova_attention", "--hidden_size", "384", "--num_hidden_layers", "1")
    run("saved", *base)
    seen = []
    real = DistillationTrainer.__init__

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("parent"))
        real(self, *args, **kwargs)

    with mock.patch("tf2rnn_hf.distill.recipe.DistillationTrainer.__init__", autospec=True, side_effect=spy):
        results = run("stage", "--init_from", str(tmp_path / "saved"), "--parent_weight", "0.5", "--weight_bits", "4")
    saved = TF2RNNModel.from_pretrained(tmp_path / "saved").state_dict()
    parent = seen[0].state_dict()
    assert len(seen) == 1 and all(torch.equal(parent[k], saved[k]) for k in saved)
    assert results["fidelity"]["student"]["final_cosine"] > 0
    # Refused before the teacher's trajectories are built, not after their minutes.
    with mock.patch("tf2rnn_hf.distill.recipe.trajectories.build", side_effect=AssertionError("trajectories built")):
        with pytest.raises(ValueError, match="--parent_weight moves the targets towards the student --init_from"):
            run("orphan", *base, "--parent_weight", "0.5")


def test_init_from_trains_the_saved_student_at_the_slots_asked_for(tmp_path):
    """--init_from keeps the saved student's shape; --num_slots, a budget rather than a shape, is the one option
    that applies to it (it used to be dropped in silence, so a student meant to train at its serving cache did not)."""
    from transformers import AutoConfig

    from tf2rnn_hf.distill.recipe import main

    def run(out, *extra):
        main(_distill_args(tmp_path / out, tmp_path / "cache", "--max_steps", "1", "--use_cpu", "true",
                           "--save_strategy", "no", "--max_eval_texts", "4", *extra))
        return AutoConfig.from_pretrained(tmp_path / out)

    assert run("fresh", "--cell_type", "tova_attention", "--hidden_size", "384", "--num_hidden_layers",
               "1").num_slots == 32  # the config's default when nothing is asked
    saved = run("saved", "--cell_type", "tova_attention", "--hidden_size", "384", "--num_hidden_layers", "1",
                "--num_slots", "12")
    assert saved.num_slots == 12
    kept = run("kept", "--init_from", str(tmp_path / "saved"))
    assert (kept.cell_type, kept.num_hidden_layers, kept.num_slots) == ("tova_attention", 1, 12)
    assert run("budget", "--init_from", str(tmp_path / "saved"), "--num_slots", "6").num_slots == 6
    # A preset's count shapes the fresh students it builds, not a saved one.
    assert parse(["--preset", "quick", "--init_from", "saved"])[0].num_slots is None
    assert parse(["--preset", "quick", "--init_from", "saved", "--num_slots", "32"])[0].num_slots == 32
    assert parse(["--preset", "quick"])[0].num_slots == 128


def test_tail_layers_train_the_second_embedding_beside_the_first(tmp_path):
    """--tail_layers through the recipe: fresh or added to a saved student (its adapter starting at the identity),
    its loss logged beside the free-running one, the adapter trained and saved; --tail_open_tokens added the same way;
    not with keystroke trajectories."""
    from transformers import AutoConfig, AutoTokenizer

    from tf2rnn_hf.distill.recipe import main
    from tf2rnn_hf.distill.student import least_squares_adapter

    logged = []

    class Logs(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            logged.append(logs or {})

    def run(out, *extra):
        with mock.patch("tf2rnn_hf.distill.recipe.DistillationTrainer.__init__", autospec=True,
                        side_effect=_with_callback(Logs())):
            main(_distill_args(tmp_path / out, tmp_path / "cache", "--max_steps", "2", "--use_cpu", "true",
                               "--save_strategy", "no", "--max_eval_texts", "4", "--logging_steps", "1", *extra))
        return TF2RNNModel.from_pretrained(tmp_path / out)

    base = ("--cell_type", "tova_attention", "--hidden_size", "384", "--num_hidden_layers", "2")
    fresh = run("fresh", *base, "--tail_layers", "1")
    assert fresh.config.tail_layers == 1 and any("loss_tail" in log for log in logged)
    assert not torch.equal(fresh.cell.tail_adapter.weight, torch.eye(384))  # trained, and saved
    plain = run("plain", *base)
    gained = run("gained", "--init_from", str(tmp_path / "plain"), "--tail_layers", "1", "--learning_rate", "1e-7")
    assert AutoConfig.from_pretrained(tmp_path / "gained").tail_layers == 1
    # The new adapter starts at the least-squares map on the calibration texts (the tiny preset's 64), not the
    # identity (2 steps at lr 1e-7 leave it there).
    texts = (DATA / "train.txt").read_text().splitlines()[:64]
    weight, _ = least_squares_adapter(plain, AutoTokenizer.from_pretrained(tmp_path / "plain"), texts, 1)
    assert (gained.cell.tail_adapter.weight - weight).abs().max() < 1e-3 < (weight - torch.eye(384)).abs().max()
    again = run("again", "--init_from", str(tmp_path / "gained"), "--learning_rate", "1e-7")
    assert (again.cell.tail_adapter.weight - gained.cell.tail_adapter.weight).abs().max() < 1e-4  # kept, not refitted
    # Open tokens in the upper layers (layer 1 of 2) join a saved student the same way and train through the recipe;
    # the lower layer stays causal.
    opened = run("opened", "--init_from", str(tmp_path / "gained"), "--tail_open_tokens", "3", "--num_slots", "64")
    assert (opened.config.tail_layers, opened.config.tail_open_tokens) == (1, 3)
    assert not torch.equal(opened.cell.layers[1].up.weight, gained.cell.layers[1].up.weight)
    with pytest.raises(ValueError, match="--tail_layers trains on token trajectories"):
        run("chars", *base, "--tail_layers", "1", "--prefix_unit", "char")


def _with_callback(callback):
    """A side effect for a patched `DistillationTrainer.__init__` that builds the trainer, then adds `callback`."""
    from tf2rnn_hf.distill.trainer import DistillationTrainer

    original = DistillationTrainer.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.add_callback(callback)
    return init


@torch.no_grad()
def test_a_narrower_feed_forward_keeps_the_teachers_strongest_neurons_refitted(teacher):
    """intermediate_size below the teacher's keeps each layer's neurons by what they add on the calibration
    texts and refits their down projection to the whole block: on those texts' tokens the pruned block's mean
    output is the teacher's, and it is closer to the teacher's block than the same number of neurons drawn at
    random with the rest's mean in the bias."""
    import torch.nn.functional as F

    texts = (DATA / "heldout.txt").read_text().splitlines()[:48]
    with pytest.raises(ValueError, match="calibration_texts"):
        build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, intermediate_size=256)
    with pytest.raises(ValueError, match="intermediate_size=2000"):
        build_student(teacher, cell_type="tova_attention", num_hidden_layers=1, intermediate_size=2000,
                      calibration_texts=texts)
    with pytest.raises(ValueError, match="calibration_texts applies to the cells that inherit"):
        build_student(teacher, hidden_size=16, calibration_texts=texts)
    model, _ = build_student(teacher, cell_type="tova_attention", teacher_layers=[1, 4], intermediate_size=256,
                             calibration_texts=texts)
    assert model.config.intermediate_size == 256
    inputs = {1: [], 4: []}  # what enters each teacher layer's feed-forward, every token of every text
    hooks = [teacher.model.encoder.layer[i].intermediate.register_forward_hook(
        lambda module, args, out, i=i: inputs[i].append(args[0][0])) for i in inputs]
    try:
        for text in texts:  # one at a time: no padding tokens to leave out
            teacher.model(**teacher.tokenizer(text, return_tensors="pt", truncation=True,
                                              max_length=teacher.max_length))
    finally:
        for hook in hooks:
            hook.remove()
    generator = torch.Generator().manual_seed(0)
    for layer, index in zip(model.cell.layers, inputs):
        src, x = teacher.model.encoder.layer[index], torch.cat(inputs[index])
        neurons = src.intermediate(x)  # [tokens, 1536], after GELU
        full = F.linear(neurons, src.output.dense.weight, src.output.dense.bias)
        pruned = layer.down(F.gelu(layer.up(x)))
        torch.testing.assert_close(pruned.mean(0), full.mean(0), atol=2e-4, rtol=1e-4)
        draw = torch.randperm(neurons.shape[1], generator=generator)[:256]
        rest = torch.ones(neurons.shape[1], dtype=torch.bool)
        rest[draw] = False
        drawn = (F.linear(neurons[:, draw], src.output.dense.weight[:, draw], src.output.dense.bias)
                 + src.output.dense.weight[:, rest] @ neurons[:, rest].mean(0))
        assert (pruned - full).square().mean() < 0.8 * (drawn - full).square().mean()


def _env():
    return dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")


def test_two_processes_train_identical_weights(tmp_path):
    # On a wall-clock budget: each process has its own clock, and they must still stop at the same step
    # (else one waits forever for the other's gradients) with the same loss weights.
    cmd = [*ACCELERATE, "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision",
           "no", "--dynamo_backend", "no", str(RANK_SCRIPT),
           *_distill_args(tmp_path / "out", tmp_path / "cache", "--save_strategy", "no", "--train_minutes", "0.1",
                          "--transition_until", "0.5", "--anneal", "0.2")]
    run = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = re.findall(r"RANK (\d) WORLD (\d) SHA (\w+)", run.stdout)
    assert sorted(r for r, _, _ in lines) == ["0", "1"], run.stdout[-2000:]
    assert {w for _, w, _ in lines} == {"2"}
    assert len({sha for _, _, sha in lines}) == 1  # DDP kept both ranks' weights identical
    assert (tmp_path / "out" / "model.safetensors").is_file()
    train = json.loads((tmp_path / "out" / "results.json").read_text())["train"]
    # Throughput from the steps taken (the clock, not max_steps, ended the run): 2 ranks x 8 rows per step.
    assert 0 < train["train_samples_per_second"] == pytest.approx(16 * train["train_steps_per_second"], rel=1e-3)
    assert train["train_samples_per_second"] < 1e5


def test_two_processes_train_the_token_table_row_sparse(tmp_path):
    """`--sparse_embeddings` under DDP: the table's gradient crosses dense, both ranks keep identical weights, and
    with weight decay (which moves every row under a dense AdamW) only rows of the training texts move."""
    cmd = [*ACCELERATE, "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision",
           "no", "--dynamo_backend", "no", str(RANK_SCRIPT),
           *_distill_args(tmp_path / "out", tmp_path / "cache", "--save_strategy", "no", "--sparse_embeddings",
                          "true", "--weight_decay", "0.1", "--bf16", "false")]
    run = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = re.findall(r"RANK (\d) WORLD (\d) SHA (\w+) .* MOVED (\d+) UNREAD_MOVED (\d+)", run.stdout)
    assert sorted(line[0] for line in lines) == ["0", "1"], run.stdout[-2000:]
    assert {line[1] for line in lines} == {"2"} and len({line[2] for line in lines}) == 1
    assert all(int(moved) > 10 and unread == "0" for *_, moved, unread in lines), lines


def test_interrupted_run_resumes_to_the_same_weights(tmp_path):
    common = ["--max_steps", "40", "--save_strategy", "steps", "--save_steps", "10", "--use_cpu", "true"]
    full = subprocess.run([sys.executable, str(RANK_SCRIPT), *_distill_args(tmp_path / "full", tmp_path / "c",
                                                                            *common)],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert full.returncode == 0, full.stderr[-3000:]
    expected = re.search(r"SHA (\w+)", full.stdout).group(1)

    out = tmp_path / "cut"
    proc = subprocess.Popen([sys.executable, str(RANK_SCRIPT), *_distill_args(out, tmp_path / "c", *common)],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and not (out / "checkpoint-10" / "trainer_state.json").is_file():
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "checkpoint-40").exists(), "the run finished before it could be interrupted"
    last = max((p for p in out.glob("checkpoint-*") if (p / "trainer_state.json").is_file()),
               key=lambda p: int(p.name.split("-")[1]))
    resumed = subprocess.run([sys.executable, str(RANK_SCRIPT),
                              *_distill_args(out, tmp_path / "c", *common, "--resume_from_checkpoint", str(last))],
                             env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert re.search(r"SHA (\w+)", resumed.stdout).group(1) == expected
    # It resumed: began at the checkpoint's step and ran only the rest (a fresh start would run all 40).
    step = int(last.name.split("-")[1])
    assert re.search(r"BEGIN (\d+) RAN (\d+)", resumed.stdout).groups() == (str(step), str(40 - step))
    assert re.search(r"BEGIN (\d+) RAN (\d+)", full.stdout).groups() == ("0", "40")


def test_passage_training_joins_texts_past_sentence_length(tmp_path):
    from tf2rnn_hf.distill.recipe import main

    with pytest.raises(ValueError, match="needs --max_tokens above it"):
        main(_distill_args(tmp_path / "x", tmp_path / "cache", "--passage_tokens", "40"))  # tiny: max_tokens 16
    results = main(_distill_args(tmp_path / "out", tmp_path / "cache", "--passage_tokens", "30", "--max_tokens",
                                 "48", "--stride", "4", "--use_cpu", "true", "--save_strategy", "no"))
    stats = results["trajectory_stats"]
    assert stats["texts"] < 64 / 2  # 64 sentences joined into passages of 30+ tokens
    assert stats["prefixes"] < stats["texts"] * 30  # --stride 4: a target every 4th prefix (plus first, last)
    half = main(_distill_args(tmp_path / "half", tmp_path / "cache", "--passage_tokens", "30", "--max_tokens",
                              "48", "--passage_fraction", "0.5", "--passage_stride", "4", "--use_cpu", "true",
                              "--save_strategy", "no"))
    counts = half["trajectory_stats"]
    assert 32 < counts["texts"] < 64  # 32 sentences as they are, the other 32 joined
    # The 32 sentences keep every prefix; the passages (half the tokens) a quarter of theirs.
    every = main(_distill_args(tmp_path / "every", tmp_path / "cache", "--passage_tokens", "30", "--max_tokens",
                               "48", "--passage_fraction", "0.5", "--trajectories_only", "true"))["trajectory_stats"]
    assert every["texts"] == counts["texts"] and every["prefixes"] > counts["prefixes"] * 1.3


def test_trajectories_only_fills_the_cache_that_training_then_reads(tmp_path):
    from tf2rnn_hf.distill.recipe import main

    first = main(_distill_args(tmp_path / "out", tmp_path / "cache", "--trajectories_only", "true"))
    assert set(first) == {"timings", "trajectory_stats"} and not (tmp_path / "out" / "model.safetensors").exists()
    shards = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("stats.json")}
    assert shards
    trained = main(_distill_args(tmp_path / "out", tmp_path / "cache"))
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("stats.json")} == shards  # none recomputed
    assert trained["trajectory_stats"] == first["trajectory_stats"]


def test_exclude_sources_drops_a_source_from_the_same_draw_and_reuses_its_trajectories(tmp_path):
    """A transfer run trains on the all-sources draw less the left-out source's texts, from the shards that
    draw cached; leaving out none (the first rows hold one source) or all of the draw is an error."""
    from tf2rnn_hf.data.corpus import load_texts
    from tf2rnn_hf.distill.recipe import main

    lines = [t for t in (DATA / "train.txt").read_text().splitlines() if t.strip()]
    corpus = tmp_path / "corpus.jsonl"  # the first half "a", the second "b": an unsampled head is all "a"
    corpus.write_text("".join(json.dumps({"text": t, "source": "a" if i < len(lines) // 2 else "b"}) + "\n"
                              for i, t in enumerate(lines)))
    drawn = ("--corpus", str(corpus), "--max_train_texts", "40", "--train_sample_seed", "1")
    main(_distill_args(tmp_path / "all", tmp_path / "cache", *drawn, "--trajectories_only", "true"))
    shards = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("stats.json")}
    left = main(_distill_args(tmp_path / "left", tmp_path / "cache", *drawn, "--exclude_sources", "a",
                              "--use_cpu", "true", "--save_strategy", "no"))
    drawn_sources = load_texts(str(corpus), limit=40, shuffle_seed=1)["source"]
    assert set(drawn_sources) == {"a", "b"}
    assert left["train_texts_by_source"] == {"b": drawn_sources.count("b")}
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cache").rglob("stats.json")} == shards
    head = ("--corpus", str(corpus), "--max_train_texts", "20", "--trajectories_only", "true")
    with pytest.raises(ValueError, match="leaves out none of the 20 training texts.*'a'.*--train_sample_seed"):
        main(_distill_args(tmp_path / "x", tmp_path / "cache", *head, "--exclude_sources", "b"))
    with pytest.raises(ValueError, match="leaves out all of the 20"):
        main(_distill_args(tmp_path / "x", tmp_path / "cache", *head, "--exclude_sources", "a"))


def test_train_sample_seed_trains_on_a_sample_not_the_first_rows(tmp_path):
    from tf2rnn_hf.data.corpus import load_texts
    from tf2rnn_hf.data.trajectories import texts_fingerprint
    from tf2rnn_hf.distill.recipe import main

    main(_distill_args(tmp_path / "out", tmp_path / "cache", "--trajectories_only", "true",
                       "--train_sample_seed", "3", "--max_train_texts", "8"))
    runs = {p.stem for p in (tmp_path / "cache").rglob("runs/*.json")}
    sample = load_texts(str(DATA / "train.txt"), limit=8, shuffle_seed=3)["text"]
    head = load_texts(str(DATA / "train.txt"), limit=8)["text"]
    assert sample != head
    assert texts_fingerprint(sample) in runs and texts_fingerprint(head) not in runs
