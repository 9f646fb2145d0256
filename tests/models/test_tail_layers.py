"""`tail_layers`: the second embedding, the current word through the lower layers only (TF2RNNConfig.tail_layers)."""

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config, tiny_model

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.inference.kernels import Int8TOVAStep


def _tail_student(**overrides):
    model = tiny_model("tova_attention", num_hidden_layers=3, tail_layers=1, pooling_position_exponent=0.7,
                       **overrides)
    with torch.no_grad():  # an adapter away from its starting identity, so that a wrong one shows
        model.cell.tail_adapter.weight.add_(torch.randn_like(model.cell.tail_adapter.weight) * 0.3)
        model.cell.tail_adapter.bias.normal_(0, 0.3)
    return model


def _by_definition(model, ids, begins):
    """[T, O] the second embedding after each step of one text, from its definition, step by step: the sink's output
    and every finished word's top-layer outputs, the current word's layer-`tail_layers` outputs through the
    adapter, each step n weighed (n + 1) ** p, read out, normalised."""
    with torch.no_grad():
        hidden = model(ids[None], use_cache=False, output_hidden_states=True).hidden_states
    layers = [h[0] for h in hidden[1:-1]]
    top, typed = layers[-1], model.cell.tail_adapter(layers[model.config.tail_layers - 1])
    p = model.cell.pooling_exponent
    out = []
    for t in range(len(ids)):
        start = max(j for j in range(t + 1) if begins[j] or j == 0)
        total, pooled = 1.0, model.cell.sink_output.clone()
        for j in range(t + 1):
            w = (j + 2) ** p
            pooled, total = pooled + w * (top[j] if j < start else typed[j]), total + w
        out.append(F.normalize(model.readout(pooled / total), dim=-1))
    return torch.stack(out)


@torch.no_grad()
def test_the_second_embedding_is_its_definition_under_any_padding():
    model = _tail_student()
    torch.manual_seed(1)
    ids = torch.randint(2, 50, (3, 12))
    begins = (torch.rand(3, 12) < 0.5).long()
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0  # right padding
    mask[2, :3] = 0  # left padding
    out = model(ids, attention_mask=mask, use_cache=False, word_starts=begins)
    for row in range(3):
        real = mask[row].bool()
        expected = _by_definition(model, ids[row][real], begins[row][real])
        assert (out.tail_hidden_state[row][real] - expected).abs().max() < 1e-5, row
        # The full embedding is the model's own, unchanged by the option.
        alone = model(ids[row][real][None], use_cache=False).last_hidden_state[0]
        assert (out.last_hidden_state[row][real] - alone).abs().max() < 1e-5


@torch.no_grad()
def test_a_word_of_one_token_differs_from_the_full_embedding_by_that_token_alone():
    """Where every token is a word, the second embedding pools every earlier token's top-layer output as the full one
    does, and only the newest token's contribution differs: with an adapter that maps layer 1 to what the top layer
    wrote, the two are equal."""
    model = _tail_student()
    ids = torch.randint(2, 50, (1, 9))
    hidden = model(ids, use_cache=False, output_hidden_states=True).hidden_states
    layer1, top = hidden[1][0], hidden[-2][0]
    fit = torch.linalg.lstsq(torch.cat([layer1, torch.ones(9, 1)], 1), top).solution  # exact: 9 rows, 25 unknowns
    model.cell.tail_adapter.weight.copy_(fit[:-1].T)
    model.cell.tail_adapter.bias.copy_(fit[-1])
    out = model(ids, use_cache=False, word_starts=torch.ones_like(ids))
    assert (out.tail_hidden_state - out.last_hidden_state).abs().max() < 1e-4


def test_the_second_embedding_trains_the_adapter_and_the_lower_layers():
    model = _tail_student().train()
    ids = torch.randint(2, 50, (2, 8))
    out = model(ids, use_cache=False, word_starts=(torch.rand(2, 8) < 0.5).long())
    out.tail_hidden_state.sum().backward()
    assert model.cell.tail_adapter.weight.grad.abs().sum() > 0
    assert model.cell.layers[0].out.weight.grad.abs().sum() > 0


def test_a_saved_student_gains_the_option_at_the_identity_and_keeps_the_rest(tmp_path):
    plain = tiny_model("tova_attention", num_hidden_layers=3, pooling_position_exponent=0.7)
    plain.save_pretrained(tmp_path / "plain")
    gained = TF2RNNModel.from_pretrained(tmp_path / "plain", tail_layers=2).eval()
    assert torch.equal(gained.cell.tail_adapter.weight, torch.eye(24))
    assert not gained.cell.tail_adapter.bias.any()
    kept = {n: p for n, p in gained.named_parameters() if "tail_adapter" not in n}
    assert all(torch.equal(kept[n], p) for n, p in plain.named_parameters())
    trained = _tail_student()
    trained.save_pretrained(tmp_path / "tail")
    loaded = TF2RNNModel.from_pretrained(tmp_path / "tail").eval()
    assert loaded.config.tail_layers == 1
    assert torch.equal(loaded.cell.tail_adapter.weight, trained.cell.tail_adapter.weight)


@pytest.mark.parametrize("overrides, message", [
    (dict(cell_type="gru", hidden_size=24, embedding_size=16), "causal tova_attention"),
    (dict(cell_type="tova_attention", open_tokens=3), "causal tova_attention"),
    (dict(cell_type="tova_attention", num_hidden_layers=2, tail_layers=2), "from 1 to num_hidden_layers - 1"),
    (dict(cell_type="tova_attention", tail_layers=0), "from 1 to num_hidden_layers - 1"),
])
def test_bad_tail_layers_are_refused(overrides, message):
    kwargs = {"tail_layers": 1, **overrides}
    with pytest.raises(ValueError, match=message):
        tiny_config(**kwargs)


def test_word_starts_are_refused_where_they_cannot_be_read():
    plain = tiny_model("tova_attention")
    ids = torch.randint(2, 50, (1, 5))
    with pytest.raises(ValueError, match="config.tail_layers"):
        plain(ids, word_starts=torch.ones_like(ids))
    model = _tail_student()
    state = model(ids).past_state
    with pytest.raises(ValueError, match="empty state"):
        model(ids, past_state=state, word_starts=torch.ones_like(ids))
    with pytest.raises(ValueError, match="shape"):
        model(ids, word_starts=torch.ones(1, 4, dtype=torch.long))


def test_the_least_squares_adapter_is_the_least_squares_solution():
    from tf2rnn_hf.distill.student import least_squares_adapter

    class Words:  # a tokenizer of space-separated numbers
        pad_token_id = 0

        def __call__(self, text, **kwargs):
            return {"input_ids": [int(w) for w in text.split()][:kwargs.get("max_length", 64)]}

    model = _tail_student()
    g = torch.Generator().manual_seed(3)
    texts = [" ".join(str(int(i)) for i in torch.randint(2, 50, (n,), generator=g)) for n in range(3, 40)]
    weight, bias = least_squares_adapter(model, Words(), texts, 1, batch_size=8, ridge=0.0)
    x, y = [], []
    with torch.no_grad():
        for text in texts:
            hidden = model(torch.tensor([[int(w) for w in text.split()]]), output_hidden_states=True).hidden_states
            x.append(hidden[1][0])
            y.append(hidden[-2][0])
    x, y = torch.cat(x).double(), torch.cat(y).double()
    ones = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1)
    solution = torch.linalg.lstsq(ones, y, driver="gelsd").solution
    # The fitted values: unique even where the normal equations are near singular (layer-normed inputs).
    ours = x @ weight.double().T + bias.double()
    assert (ours - ones @ solution).abs().max() < 1e-3 * y.abs().max()
    assert (ours - y).pow(2).mean() < 0.5 * (x - y).pow(2).mean()  # better than the identity it replaces


def _deferred(model, ids, begins, state=None):
    """Step one text's tokens with `step_deferred`: the second embedding after each ([T, O]) and the state."""
    out = []
    for t in range(ids.shape[1]):
        emb, state = model.step_deferred(ids[:, t], state, begins_word=bool(begins[0, t]))
        out.append(emb[0])
    return torch.stack(out), state


@pytest.mark.parametrize("slots", [5, 40])  # 5: the caches evict within the text
@torch.no_grad()
def test_a_deferred_keystroke_shows_the_second_embedding_and_a_committed_word_the_full_one(slots):
    model = _tail_student(num_slots=slots).eval()
    torch.manual_seed(2)
    ids = torch.randint(2, 50, (1, 14))
    begins = (torch.rand(1, 14) < 0.4).long()
    begins[0, 0] = 1
    reference = model(ids, word_starts=begins)
    tails, state = _deferred(model, ids, begins)
    assert (tails - reference.tail_hidden_state[0]).abs().max() < 1e-5
    assert state.held_tokens == 14 - int(begins[0].nonzero().max())
    full, committed = model.commit_word(state)
    assert (full - reference.pooler_output).abs().max() < 1e-5
    # The committed state is the model's own: stepping and forward go on from it as from forward's state.
    more = torch.randint(2, 50, (1, 4))
    again = model(more, past_state=committed).pooler_output
    assert (again - model(more, past_state=reference.past_state).pooler_output).abs().max() < 1e-5
    assert model.commit_word(committed)[1] is committed  # nothing held: unchanged


@torch.no_grad()
def test_deferred_states_batch_and_refuse_what_would_drop_the_held_word():
    model = _tail_student().eval()
    ids = torch.randint(2, 50, (2, 6))
    begins = torch.tensor([[1, 0, 1, 0, 1, 0]] * 2)
    _, batched = _deferred(model, ids, begins)
    for row in range(2):
        _, alone = _deferred(model, ids[row:row + 1], begins[:1])
        assert (batched.index_select([row]).held_outputs - alone.held_outputs).abs().max() < 1e-6
    with pytest.raises(ValueError, match="commit_word"):
        model.step(ids[:, 0], batched)
    with pytest.raises(ValueError, match="commit_word"):
        model(ids, past_state=batched)
    with pytest.raises(ValueError, match="commit_word"):
        batched.reset([0])
    shorter = _deferred(model, ids[:1, :5], begins[:1])[1]
    with pytest.raises(ValueError, match="as many"):
        type(batched).concat([batched.index_select([0]), shorter])
    assert batched.reset().held_tokens == 0
    with pytest.raises(ValueError, match="config.tail_layers"):
        tiny_model("tova_attention").step_deferred(ids[:, 0])


def _open_upper_student():
    return _tail_student(tail_open_tokens=3, num_slots=16)


@torch.no_grad()
def test_open_upper_layers_give_each_step_what_a_pass_over_its_prefix_gives():
    """`tail_open_tokens`: the full embedding at a step is the pooled output of one pass over the prefix that ends
    there (the upper layers' newest block open, the lower layers causal), whichever steps a loss reads and under
    padding; the second embedding pools every earlier word as the upper layers left it at the previous word's end."""
    model = _open_upper_student()
    torch.manual_seed(2)
    ids = torch.randint(2, 50, (2, 11))
    begins = (torch.rand(2, 11) < 0.5).long()
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    read = torch.zeros_like(mask, dtype=torch.bool)
    read[:, 1::4] = read[:, -1] = True
    out = model(ids, attention_mask=mask, use_cache=False, word_starts=begins)
    sparse = model(ids, attention_mask=mask, use_cache=False, word_starts=begins, output_steps=read)
    p = model.cell.pooling_exponent
    for row in range(2):
        real = mask[row].bool()
        x, words = ids[row][real], begins[row][real]
        typed = model.cell.tail_adapter(model(x[None], use_cache=False, output_hidden_states=True).hidden_states[1][0])
        for s in range(len(x)):
            alone = model(x[None, :s + 1], use_cache=False, output_hidden_states=True)
            assert (out.last_hidden_state[row][real][s] - alone.pooler_output[0]).abs().max() < 1e-5, (row, s)
            start = max(j for j in range(s + 1) if words[j] or j == 0)
            total = 1 + sum((j + 2) ** p for j in range(start))
            pooled = (model(x[None, :start], use_cache=False, output_hidden_states=True).hidden_states[-1][0, -1]
                      if start else model.cell.sink_output) * total
            for j in range(start, s + 1):
                pooled, total = pooled + (j + 2) ** p * typed[j], total + (j + 2) ** p
            expected = F.normalize(model.readout(pooled / total), dim=-1)
            assert (out.tail_hidden_state[row][real][s] - expected).abs().max() < 1e-5, (row, s)
    for name in ("last_hidden_state", "tail_hidden_state"):
        assert (getattr(sparse, name)[read] - getattr(out, name)[read]).abs().max() < 1e-6, name


@torch.no_grad()
def test_open_upper_layers_differ_from_causal_ones_and_leave_the_lower_layers_causal():
    causal, opened = _tail_student(num_slots=16), _open_upper_student()
    opened.load_state_dict(causal.state_dict())
    ids = torch.randint(2, 50, (1, 9))
    a = causal(ids, use_cache=False, output_hidden_states=True).hidden_states
    b = opened(ids, use_cache=False, output_hidden_states=True).hidden_states
    assert torch.equal(a[1], b[1])  # layer 1 of 3 (tail_layers 1) is causal in both
    assert (a[3] - b[3]).abs().max() > 1e-3  # the top layer reads the open block's later tokens


@pytest.mark.parametrize("slots", [16, 5])  # 5: the caches evict within the text (forward steps)
@torch.no_grad()
def test_open_upper_layers_stream_word_by_word_as_the_pass_gives_them(slots):
    """A stream of a `tail_open_tokens` student (`step_deferred`, `commit_word`): each keystroke shows the second
    embedding and each word's end the full one that `forward` gives there, blocks of W committing inside words and
    across them; states of rows whose open blocks hold different counts stack and step as each alone."""
    model = _tail_student(tail_open_tokens=3, num_slots=slots).eval()
    torch.manual_seed(3)
    ids = torch.randint(2, 50, (1, 14))
    begins = torch.tensor([[1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 0]])  # words of 4, 1, 2, 5 and 2 tokens
    reference = model(ids, use_cache=False, word_starts=begins)
    state = None
    for t in range(14):
        if begins[0, t] and t:
            full, state = model.commit_word(state)
            assert (full - reference.last_hidden_state[:, t - 1]).abs().max() < 1e-5, t
        emb, state = model.step_deferred(ids[:, t], state, begins_word=bool(begins[0, t]))
        assert (emb - reference.tail_hidden_state[:, t]).abs().max() < 1e-5, t
    if slots < 14:  # past the cache every layer holds at most `slots` rows
        assert all(float(state.cell_state[3 * i + 2].sum()) <= slots for i in range(3))
    full, _ = model.commit_word(state)
    assert (full - reference.pooler_output).abs().max() < 1e-5
    # Two rows, their open blocks holding 2 and 1 tokens, then the same tokens in both.
    rows = [model.commit_word(_deferred(model, ids[:, :n], begins[:, :n])[1])[1] for n in (5, 7)]
    assert [int(r.cell_state[10]) for r in rows] == [2, 1]  # the open block's count, after 3 layers' entries
    batched = type(rows[0]).concat(rows)
    more, more_begins = ids[:, 7:12].expand(2, -1), torch.tensor([1, 0, 1, 1, 0])
    for t in range(5):
        batched_emb, batched = model.step_deferred(more[:, t], batched, begins_word=bool(more_begins[t]))
        for row in range(2):
            alone = model.step_deferred(more[:1, t], rows[row], begins_word=bool(more_begins[t]))
            rows[row] = alone[1]
            assert (batched_emb[row] - alone[0][0]).abs().max() < 1e-5, (t, row)


@torch.no_grad()
def test_open_upper_layers_forward_state_is_the_stream_state_at_a_word_end():
    """`forward`'s state of a `tail_open_tokens` student is what a stream holds after committing the same tokens at a
    word's end (open blocks of 0, 1 and 2 tokens; a padded row), and streams go on from it as from their own."""
    model = _open_upper_student().eval()
    torch.manual_seed(4)
    begins = torch.tensor([[1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0]] * 2)  # words end before steps 4, 5, 6 and 9
    ids = torch.randint(2, 50, (2, 12))
    for n in (4, 5, 6, 9):
        mask = torch.ones(2, n, dtype=torch.long)
        mask[1, :2] = 0
        state = model(ids[:, :n], attention_mask=mask, use_cache=True).past_state
        for row, first in ((0, 0), (1, 2)):
            words = begins[row:row + 1, first:].clone()
            words[0, 0] = 1
            _, streamed = _deferred(model, ids[row:row + 1, first:n], words)
            _, streamed = model.commit_word(streamed)
            ours = state.index_select([row])
            for i, (a, b) in enumerate(zip(ours.cell_state, streamed.cell_state)):
                assert (a - b).abs().max() < 1e-5, (n, row, i)
            rest = _deferred(model, ids[row:row + 1, n:], begins[:1, n:], ours)[0]
            assert (rest - _deferred(model, ids[row:row + 1, n:], begins[:1, n:], streamed)[0]).abs().max() < 1e-5


@torch.no_grad()
def test_open_upper_layers_step_and_forward_past_the_cache_as_streams_commit_words():
    """`step` runs each token as a word of its own, so it equals the pass at every step; `forward` goes on from a
    state and past `num_slots` by stepping so; and a text's embedding after a word does not depend on where its
    words end, evictions included (blocks of W commit as they fill)."""
    model = _open_upper_student()
    torch.manual_seed(5)
    ids = torch.randint(2, 50, (1, 14))
    whole = model(ids, use_cache=False).last_hidden_state[0]
    state, stepped = None, []
    for t in range(14):
        emb, state = model.step(ids[:, t], state)
        stepped.append(emb[0])
    assert (torch.stack(stepped) - whole).abs().max() < 1e-5
    head = model(ids[:, :6])
    assert (model(ids[:, 6:], past_state=head.past_state).last_hidden_state[0] - whole[6:]).abs().max() < 1e-5
    small = _tail_student(tail_open_tokens=3, num_slots=5)
    begins = torch.tensor([[1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 0]])
    every = small(ids, use_cache=False).last_hidden_state[0]  # 14 tokens, 5 slots: stepped, evicting
    state = None
    for t in range(14):
        if begins[0, t] and t:
            full, state = small.commit_word(state)
            assert (full[0] - every[t - 1]).abs().max() < 1e-5, t
        state = small.step_deferred(ids[:, t], state, begins_word=bool(begins[0, t]))[1]
    assert (small.commit_word(state)[0][0] - every[-1]).abs().max() < 1e-5
    assert Int8TOVAStep.supports(model)  # its fused step: tests/inference/test_kernels.py


@pytest.mark.parametrize("overrides, message", [
    (dict(tail_open_tokens=0), "tail_open_tokens must be a whole number >= 1"),
    (dict(tail_layers=None, tail_open_tokens=2), "set tail_layers"),
    (dict(tail_open_tokens=6, num_slots=5), "must fit the cache"),
])
def test_bad_tail_open_tokens_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(cell_type="tova_attention", **{"tail_layers": 1, **overrides})
