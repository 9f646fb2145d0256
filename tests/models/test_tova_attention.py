"""The teacher-inherited cell: the teacher made causal, exactly, and a TOVA-bounded cache past `num_slots`."""

from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model

from tf2rnn_hf.distill import build_student


@pytest.fixture(scope="module")
def inherited(teacher):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_slots=64)
    return model.eval(), tokenizer


def causal_teacher(teacher, ids, layers=None):
    """The real BertModel on [CLS] + ids under a causal 4-D mask, mean-pooled over each prefix."""
    x = torch.tensor([[teacher.tokenizer.cls_token_id, *ids]])
    n = x.shape[1]
    with torch.no_grad():
        out = teacher.model(input_ids=x, attention_mask=torch.ones(n, n).tril().bool()[None, None],
                            output_hidden_states=True)
    h = out.last_hidden_state[0] if layers is None else out.hidden_states[layers][0]
    return F.normalize(torch.cumsum(h, 0) / torch.arange(1, n + 1)[:, None], dim=-1)[1:]


@torch.no_grad()
def forward_and_steps(model, ids):
    """The model's trajectory over `ids` in one forward, and the same typed token by token with `step`."""
    trajectory = model(torch.tensor([ids])).last_hidden_state[0]
    state, streamed = None, []
    for token in ids:
        emb, state = model.step(torch.tensor([token]), state)
        streamed.append(emb[0])
    return trajectory, torch.stack(streamed)


def test_before_training_the_student_is_the_teacher_made_causal(teacher, inherited):
    model, tokenizer = inherited
    for text in ["The quick brown fox jumps over the lazy dog.", "search as you type", "x"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        trajectory, streamed = forward_and_steps(model, ids)
        reference = causal_teacher(teacher, ids)
        assert (trajectory - reference).abs().max() < 1e-5, text
        assert (streamed - reference).abs().max() < 1e-5, text
        # Special tokens are no-ops: the [CLS] is the sink, not a step.
        with_specials = tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            assert torch.allclose(model(with_specials).pooler_output[0], reference[-1], atol=1e-5)


def block_teacher(teacher, ids, width):
    """The real BertModel on [CLS] + ids with the newest `width`-block open: [CLS] alone, then blocks of `width`
    that attend to themselves and to earlier blocks, mean-pooled, for every prefix (one pass per prefix)."""
    out = []
    for n in range(1, len(ids) + 1):
        block = torch.tensor([0] + [1 + j // width for j in range(n)])
        mask = block[None, :] <= block[:, None]
        with torch.no_grad():
            h = teacher.model(input_ids=torch.tensor([[teacher.tokenizer.cls_token_id, *ids[:n]]]),
                              attention_mask=mask[None, None]).last_hidden_state[0]
        out.append(F.normalize(h.mean(0), dim=-1))
    return torch.stack(out)


@pytest.mark.parametrize("width", [2, 3])
def test_open_tokens_before_training_are_the_teacher_with_its_newest_block_open(teacher, width):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_slots=64, open_tokens=width)
    model.eval()
    ids = tokenizer("The quick brown fox jumps over the lazy dog.", add_special_tokens=False)["input_ids"]
    reference = block_teacher(teacher, ids, width)
    trajectory, streamed = forward_and_steps(model, ids)
    # A loss that reads only some steps gets those exactly (the rest are not recomputed).
    read = torch.zeros(1, len(ids), dtype=torch.bool)
    read[0, ::3] = read[0, -1] = True
    with torch.no_grad():
        sparse = model(torch.tensor([ids]), output_steps=read).last_hidden_state[0]
    assert (trajectory - reference).abs().max() < 1e-5
    assert (streamed - reference).abs().max() < 1e-5
    assert (sparse[read[0]] - reference[read[0]]).abs().max() < 1e-5


def test_fewer_layers_take_the_named_teacher_layers(teacher):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", teacher_layers=[0, 1, 2])
    assert model.config.num_hidden_layers == 3
    ids = tokenizer("a shorter student", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        got = model.eval()(torch.tensor([ids])).last_hidden_state[0]
    # The first three teacher layers, causal, pooled from the third layer's output (hidden_states[3]).
    assert (got - causal_teacher(teacher, ids, layers=3)).abs().max() < 1e-5
    evenly, _ = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2)
    assert torch.equal(evenly.cell.layers[1].up.weight, teacher.model.encoder.layer[5].intermediate.dense.weight)
    assert torch.equal(evenly.cell.layers[0].up.weight, teacher.model.encoder.layer[2].intermediate.dense.weight)


def test_layer_inputs_start_the_table_at_what_the_first_copied_layer_reads(teacher):
    """`token_init="layer_inputs"`: the student's embedding norm maps each token's row back to the teacher's state
    entering its (last) layer for that token alone, and that start is closer to the teacher than raw embeddings."""
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1,
                                     token_init="layer_inputs")
    cell, table = model.cell, model.get_input_embeddings().weight
    ids = tokenizer("the cat sat", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        for token in ids:  # the state entering layer 5, by an independent BERT call
            x = torch.tensor([teacher.wrap([token])])
            expected = teacher.model(input_ids=x, output_hidden_states=True).hidden_states[5][0, 1]
            assert (cell.embedding_norm(table[token]) - expected).abs().max() < 1e-4
    raw, _ = build_student(teacher, cell_type="tova_attention", num_hidden_layers=1)
    texts = ["the cat sat on the mat", "stocks fell sharply in early trading", "a recipe for bread with honey",
             "the committee will meet again next week", "rain is expected across the north tonight"]
    target = teacher.encode(texts)

    def cosine(student):
        with torch.no_grad():
            return sum(F.cosine_similarity(student.eval()(torch.tensor([tokenizer(t, add_special_tokens=False)
                                                                        ["input_ids"]])).pooler_output[0],
                                           e, dim=0) for t, e in zip(texts, target)) / len(texts)

    assert cosine(model) > cosine(raw) + 0.1
    with pytest.raises(ValueError, match="starts a student that inherits the teacher's layers"):
        build_student(teacher, cell_type="gru", hidden_size=16, token_init="layer_inputs")


@pytest.mark.parametrize("kwargs, message", [
    (dict(hidden_size=768), "the teacher's width 384"),
    (dict(token_init="teacher_outputs"), "reads the teacher's input embeddings"),
    (dict(teacher_layers=[0, 6]), "teacher_layers must name layers in [0, 6)"),
    (dict(num_hidden_layers=7), "between 1 and the teacher's 6"),
    (dict(num_attention_heads=4), "has the teacher's num_attention_heads 12"),
])
def test_inherited_shapes_are_the_teachers(teacher, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)").replace("(", r"\(")):
        build_student(teacher, cell_type="tova_attention", **kwargs)


def test_teacher_layers_apply_only_to_inherited_cells(teacher):
    with pytest.raises(ValueError, match="teacher_layers applies to the cells that inherit the teacher"):
        build_student(teacher, cell_type="gru", hidden_size=16, teacher_layers=[0])


@pytest.mark.parametrize("pooling", [{}, dict(bidirectional_pooling=True), dict(pooling_position_exponent=1.5),
                                     dict(open_tokens=3), dict(open_tokens=2, pooling_position_exponent=1.5)])
@pytest.mark.parametrize("steps", [4, 13])  # within the 5-slot cache: the parallel form; past it: TOVA steps
def test_forward_equals_steps_with_and_without_eviction(steps, pooling):
    model = tiny_model("tova_attention", **pooling)
    ids = torch.randint(2, 50, (3, steps))
    mask = torch.ones_like(ids)
    mask[1, steps // 2:] = 0
    with torch.no_grad():
        out = model(ids, attention_mask=mask, use_cache=True)
        for row in range(3):
            state = None
            for t in range(steps):
                if mask[row, t]:
                    emb, state = model.step(ids[row, t:t + 1], state)
                    assert (emb[0] - out.last_hidden_state[row, t]).abs().max() < 1e-5, (row, t)
            for a, b in zip(state.cell_state, out.past_state.index_select([row]).cell_state):
                assert (a - b).abs().max() < 1e-5
        # In two chunks: the first starts from an empty cache (the shortcut every training batch takes), the
        # second attends to the slots the first filled.
        head = model(ids[:, :2], attention_mask=mask[:, :2], use_cache=True)
        tail = model(ids[:, 2:], attention_mask=mask[:, 2:], past_state=head.past_state, use_cache=True)
        chunked = torch.cat([head.last_hidden_state, tail.last_hidden_state], 1)
        assert (chunked - out.last_hidden_state).abs().max() < 1e-5
        for a, b in zip(tail.past_state.cell_state, out.past_state.cell_state):
            assert (a - b).abs().max() < 1e-5


@pytest.mark.parametrize("pooling", [{}, dict(bidirectional_pooling=True), dict(pooling_position_exponent=1.5)])
@pytest.mark.parametrize("slots", [3, 40])  # blocks of 32 steps over a small cache; one block longer than the text
def test_past_the_cache_forward_runs_layer_by_layer_and_equals_the_steps(slots, pooling):
    # Texts of 75 steps (padded rows among them, one empty), the cache overflowing many times: the evicting form
    # (each layer's products and attention over blocks of steps at once, TOVA's choices step by step) gives every
    # step's output and the final state as stepping does, never falling back to stepping the model, also when a
    # chunk starts from a full cache.
    model = tiny_model("tova_attention", num_slots=slots, **pooling)
    ids = torch.randint(2, 50, (4, 75))
    mask = torch.ones_like(ids)
    mask[1, 50:] = 0
    mask[2, 7:] = 0
    mask[3, :] = 0
    with torch.no_grad(), mock.patch.object(type(model.cell), "_forward_stepwise", side_effect=AssertionError):
        out = model(ids, attention_mask=mask, use_cache=True)
        head = model(ids[:, :60], attention_mask=mask[:, :60], use_cache=True)
        tail = model(ids[:, 60:], attention_mask=mask[:, 60:], past_state=head.past_state, use_cache=True)
    with torch.no_grad():
        for row in range(3):
            state = None
            for t in range(75):
                if mask[row, t]:
                    emb, state = model.step(ids[row, t:t + 1], state)
                    assert (emb[0] - out.last_hidden_state[row, t]).abs().max() < 1e-5, (row, t)
            for a, b in zip(state.cell_state, out.past_state.index_select([row]).cell_state):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)  # the pooling's sums reach ~75
    assert out.past_state.cell_state[-2].flatten().tolist() == [75, 50, 7, 0]
    assert torch.equal(out.past_state.cell_state[2][3], torch.zeros(slots))  # the empty row's cache stays empty
    chunked = torch.cat([head.last_hidden_state, tail.last_hidden_state], 1)
    assert (chunked - out.last_hidden_state)[mask.bool()].abs().max() < 1e-5
    for a, b in zip(tail.past_state.cell_state, out.past_state.cell_state):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_training_through_the_evicting_form_gets_the_gradients_of_stepping():
    # The slot choices carry no gradient; what flows through the kept keys and values is stepping's, to rounding.
    model = tiny_model("tova_attention", num_slots=3).train()
    ids = torch.randint(2, 50, (2, 40))
    weights = torch.randn(2, 40, model.config.output_size)  # every step's output counts, each differently

    def gradients():
        model.zero_grad()
        (model(ids, use_cache=False).last_hidden_state * weights).sum().backward()
        return [p.grad.clone() for p in model.cell.parameters() if p.grad is not None]

    evicting = gradients()
    stepping = mock.patch.object(type(model.cell), "_forward_evicting", lambda self, inputs, state, lengths, use_cache:
                                 self._forward_stepwise(self._step_all, inputs, state, lengths))
    with stepping:
        stepped = gradients()
    assert len(evicting) == len(stepped) > 10
    for a, b in zip(evicting, stepped):
        assert b.abs().max() > 1e-4  # a gradient that counts
        assert (a - b).abs().max() <= 1e-5 * b.abs().max()


def test_a_full_cache_drops_the_slot_the_query_weighs_least():
    model = tiny_model("tova_attention", num_hidden_layers=1, num_slots=3)
    layer = model.cell.layers[0]
    with torch.no_grad():
        state = model(torch.tensor([[5, 6, 7]]), use_cache=True).past_state
        keys, values, fill = state.cell_state[:3]
        assert fill.tolist() == [[1.0, 1.0, 1.0]]
        # What the next query weighs each slot, as the step computes it (heads averaged).
        count = state.cell_state[3]
        x = model.cell._embed(model.embeddings(torch.tensor([[8]])), count + 1)
        allowed = torch.ones(1, 1, 4, dtype=torch.bool)
        *_, weights = layer.attend(x, keys, values, allowed)
        lowest = int(weights[0, :, 0, 1:4].mean(0).argmin())
        after = model(torch.tensor([[8]]), past_state=state, use_cache=True).past_state.cell_state
        kept = [i for i in range(3) if i != lowest]
        assert torch.equal(after[0][0, kept], keys[0, kept])  # the others stay where they were
        assert not torch.equal(after[0][0, lowest], keys[0, lowest])  # the new step took the lowest's slot
        assert after[2].tolist() == [[1.0, 1.0, 1.0]]


def test_the_parallel_forms_fused_attention_equals_the_weighted_one():
    """Training's parallel forms attend without weights (PyTorch's fused attention); a step reads the weights. Both
    give the same layer output and gradients, for a cache, a padded row and queries that may see only the sink."""
    model = tiny_model("tova_attention", num_hidden_layers=1)
    layer = model.cell.layers[0]
    torch.manual_seed(0)
    b, s, t, h = 3, 5, 6, model.config.hidden_size
    keys, values = torch.randn(b, s, h), torch.randn(b, s, h)
    allowed = torch.rand(b, t, s + t) < 0.5
    allowed[1, 2] = False  # a query that sees the sink alone
    allowed[2, :, s + 3:] = False  # a padded row's steps
    results = []
    for need_weights in (True, False):
        x = torch.randn(b, t, h, generator=torch.Generator().manual_seed(1), requires_grad=True)
        out, k, v, weights = layer.attend(x, keys, values, allowed, need_weights=need_weights)
        assert (weights is None) != need_weights
        (out.square().sum() + k.sum() + v.sum()).backward()
        grads = [x.grad] + [p.grad.clone() for p in layer.parameters()]
        layer.zero_grad()
        results.append((out.detach(), grads))
    (out_w, grads_w), (out_f, grads_f) = results
    assert (out_w - out_f).abs().max() < 1e-5
    for a, c in zip(grads_w, grads_f):
        assert (a - c).abs().max() < 1e-4 * max(1.0, float(a.abs().max()))


def test_under_cpu_bf16_autocast_the_fused_attention_runs_in_fp32():
    """bf16 training on a CPU (`--bf16`): the products run in bf16 but the fused attention in fp32, whose bf16
    backward on CPU cost more than the products save. The output stays within bf16's rounding of fp32."""
    model = tiny_model("tova_attention", num_hidden_layers=1)
    layer = model.cell.layers[0]
    torch.manual_seed(0)
    b, s, t, h = 2, 3, 5, model.config.hidden_size
    keys, values, x = torch.randn(b, s, h), torch.randn(b, s, h), torch.randn(b, t, h)
    allowed = torch.ones(b, t, s + t, dtype=torch.bool)
    seen = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append([a.dtype for a in args[:3]])
        return sdpa(*args, **kwargs)

    reference = layer.attend(x, keys, values, allowed, need_weights=False)[0]
    with torch.autocast("cpu", dtype=torch.bfloat16), mock.patch.object(F, "scaled_dot_product_attention", spy):
        out = layer.attend(x, keys, values, allowed, need_weights=False)[0]
    assert seen == [[torch.float32] * 3]
    out.float().sum().backward()  # the mixed graph trains
    assert all(p.grad is not None and bool(p.grad.isfinite().all()) for p in (layer.query.weight, layer.up.weight))
    assert F.cosine_similarity(out.float(), reference, dim=-1).min() > 0.99


@pytest.mark.parametrize("steps", [4, 13])
def test_bidirectional_pooling_is_the_mean_of_attention_both_ways(steps):
    """The O(1) running sums give, after every step, what the O(n^2) definition gives over the whole prefix:
    every token's unnormalised linear attention to every token (later ones too), mean-pooled and normalised."""
    from tf2rnn_hf.models.tf2rnn.cells_tf2rnn import _phi

    model = tiny_model("tova_attention", bidirectional_pooling=True)
    cell, pooling = model.cell, model.cell.pooling
    ids = torch.randint(2, 50, (1, steps))
    with torch.no_grad():
        outputs, _ = cell(model.embeddings(ids), model.init_state(1).cell_state, torch.tensor([steps]))
        top, pooled = outputs[-2][0], outputs[-1][0]
        heads, d = pooling.heads, pooling.head_dim
        q, k = _phi(pooling.query(top).view(steps, heads, d)), _phi(pooling.key(top).view(steps, heads, d))
        v = pooling.value(top).view(steps, heads, d)
        sink = cell.sink_output
        for t in range(steps):
            weights = torch.einsum("ihd,jhd->hij", q[:t + 1], k[:t + 1])  # i attends to j, j > i included
            mix = torch.einsum("hij,jhd->hd", weights, v[:t + 1]) / weights.sum((1, 2))[:, None]
            mean = (sink + top[:t + 1].sum(0)) / (t + 2)
            correction = F.linear(mix.reshape(-1), pooling.out_weight, pooling.out_bias)
            assert (pooled[t] - mean - correction).abs().max() < 1e-5, t


def test_bidirectional_pooling_starts_as_the_causal_teacher(teacher):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2,
                                     bidirectional_pooling=True)
    plain, _ = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2)
    ids = torch.tensor([tokenizer("search as you type", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model.eval()(ids).last_hidden_state, plain.eval()(ids).last_hidden_state)
    with pytest.raises(ValueError, match="bidirectional_pooling is a tova_attention option"):
        build_student(teacher, cell_type="gru", hidden_size=16, bidirectional_pooling=True)


@pytest.mark.parametrize("steps", [4, 13])
def test_position_weighted_pooling_is_the_weighted_mean(steps):
    """After every step the pooled output is the mean of the sink's output (weight 1) and the top layer's
    outputs, step n weighted (n + 1) ** p, as the definition gives it over the whole prefix."""
    model = tiny_model("tova_attention", pooling_position_exponent=0.7)
    cell = model.cell
    assert cell.pooling_exponent.requires_grad and cell.pooling_exponent.item() == pytest.approx(0.7)
    ids = torch.randint(2, 50, (1, steps))
    with torch.no_grad():
        outputs, _ = cell(model.embeddings(ids), model.init_state(1).cell_state, torch.tensor([steps]))
    top, pooled = outputs[-2][0], outputs[-1][0]
    weights = torch.arange(2, steps + 2, dtype=torch.float).pow(0.7)  # step n = 1.. weighs (n + 1) ** 0.7
    for t in range(steps):
        mean = (cell.sink_output + (weights[:t + 1, None] * top[:t + 1]).sum(0)) / (1 + weights[:t + 1].sum())
        assert (pooled[t] - mean).abs().max() < 1e-5, t


def test_position_weighted_pooling_at_exponent_zero_is_the_teachers_mean_and_learns_its_exponent(teacher):
    model, tokenizer = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2,
                                     pooling_position_exponent=0.0)
    plain, _ = build_student(teacher, cell_type="tova_attention", num_hidden_layers=2)
    ids = torch.tensor([tokenizer("search as you type", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(model.eval()(ids).last_hidden_state, plain.eval()(ids).last_hidden_state, atol=1e-6)
    model.train()(ids).last_hidden_state[0, -1, 0].backward()
    assert model.cell.pooling_exponent.grad.abs().item() > 0  # trained with the rest, not a fixed setting
    for bad in ("gru", float("nan")):
        kwargs = dict(cell_type="gru", hidden_size=16, pooling_position_exponent=1.0) if bad == "gru" else dict(
            cell_type="tova_attention", num_hidden_layers=1, pooling_position_exponent=bad)
        with pytest.raises(ValueError, match="pooling_position_exponent"):
            build_student(teacher, **kwargs)


def test_the_learned_pooling_exponent_is_saved_and_loaded(tmp_path):
    """The config holds the exponent's starting value; the weights hold the learned one, which loading keeps."""
    from tf2rnn_hf import TF2RNNModel

    model = tiny_model("tova_attention", pooling_position_exponent=1.0)
    with torch.no_grad():
        model.cell.pooling_exponent.fill_(0.37)
    model.save_pretrained(tmp_path)
    loaded = TF2RNNModel.from_pretrained(tmp_path).eval()
    assert loaded.cell.pooling_exponent.item() == pytest.approx(0.37)
    ids = torch.randint(2, 50, (2, 7))
    with torch.no_grad():
        assert torch.allclose(loaded(ids).last_hidden_state, model(ids).last_hidden_state, atol=1e-6)
