"""The seed cells: parallel == recurrent forms, O(1) state, TOVA eviction, trainability, long-run stability."""

import pytest
import torch
from conftest import tiny_model

from tf2rnn_hf import TF2RNNModel
from tf2rnn_hf.models.tf2rnn.cells_tf2rnn import _MultiStateLayer


@pytest.mark.parametrize("cell", ["linear_attention", "rem"])
def test_parallel_form_equals_recurrence(cell):
    model = tiny_model(cell, num_hidden_layers=1)
    x = torch.randn(3, 17, model.config.embedding_size)
    lengths = torch.tensor([17, 9, 1])
    with torch.no_grad():
        state0 = model.cell.init_state(3)
        # Warm start from a non-trivial state, so the initial-state terms of the parallel form are tested.
        _, warm = model.cell(torch.randn(3, 4, model.config.embedding_size), state0, torch.tensor([4, 2, 3]))
        outputs, final = model.cell(x, warm, lengths)
        state = warm
        for t in range(17):
            y, stepped = model.cell.step(x[:, t], state)
            live = t < lengths
            for row in range(3):
                if live[row]:
                    assert (y[row] - outputs[-1][row, t]).abs().max() <= 1e-5, (t, row)
            state = tuple(torch.where(live.view(-1, *([1] * (s.dim() - 1))), s, o) for s, o in zip(stepped, state))
        for a, b in zip(final, state):
            assert (a - b).abs().max() <= 1e-5
        # Long inputs run the parallel form chunk by chunk; that must not change anything either.
        model.cell.chunk_size = 4
        chunked, chunked_final = model.cell(x, warm, lengths)
        for row, n in enumerate(lengths.tolist()):
            assert (chunked[-1][row, :n] - outputs[-1][row, :n]).abs().max() <= 1e-5
        for a, b in zip(chunked_final, final):
            assert (a - b).abs().max() <= 1e-5


def test_state_size_is_independent_of_length(cell_type):
    model = tiny_model(cell_type)
    sizes = {}
    with torch.no_grad():
        for steps in (10, 1000):
            state = model(torch.randint(2, 50, (2, steps)), use_cache=True).past_state
            sizes[steps] = (state.nbytes(), [tuple(t.shape) for t in state.cell_state])
    assert sizes[10] == sizes[1000]
    if cell_type == "multistate":
        state = model(torch.randint(2, 50, (2, 100)), use_cache=True).past_state
        valid = state.cell_state[1]
        assert valid.shape[-1] == model.config.num_slots and int(valid.sum(-1).max()) == model.config.num_slots


def test_tova_evicts_the_lowest_weight_slot():
    config = tiny_model("multistate").config
    layer = _MultiStateLayer(config, input_size=config.hidden_size)
    h, k = config.hidden_size, config.num_slots
    with torch.no_grad():
        # Query and keys are identities so the score of slot i is <prev, slot_i> / sqrt(H).
        layer.q.weight.copy_(torch.eye(h))
        layer.key.weight.copy_(torch.eye(h))
        prev = torch.zeros(1, h)
        prev[0, 0] = 1.0
        slots = torch.zeros(1, k, h)
        scores = torch.tensor([3.0, 1.0, -4.0, 2.0, 0.5])  # slot 2 has the lowest weight
        slots[0, :, 0] = scores
        slots[0, :, 1] = torch.arange(k, dtype=torch.float) + 10  # a tag to find each slot afterwards
        valid = torch.ones(1, k)
        weights = layer.attention_weights(prev, slots, valid)
        assert int(weights.argmin()) == 2
        h_new, (new_slots, new_valid, new_prev) = layer.step(torch.zeros(1, h), (slots, valid, prev))
        tags = new_slots[0, :, 1].tolist()
        assert 12.0 not in tags  # the lowest-weight slot is gone
        assert torch.equal(new_slots[0, 2], h_new[0]) and torch.equal(new_prev, h_new)
        assert [t for i, t in enumerate(tags) if i != 2] == [10.0, 11.0, 13.0, 14.0]
        # Not yet full: the new state fills the next free slot and nothing is evicted.
        valid = torch.tensor([[1.0, 1.0, 0.0, 0.0, 0.0]])
        _, (partial, pvalid, _) = layer.step(torch.zeros(1, h), (slots * valid[..., None], valid, prev))
        assert pvalid.tolist() == [[1.0, 1.0, 1.0, 0.0, 0.0]]
        assert partial[0, :2, 1].tolist() == [10.0, 11.0]


def test_unbounded_when_k_covers_the_text():
    model = tiny_model("multistate", num_slots=64)
    state = model(torch.randint(2, 50, (1, 20)), use_cache=True).past_state
    assert int(state.cell_state[1].sum()) == 20  # every step kept: the unbounded multi-state RNN


def test_training_smoke_lowers_the_loss(cell_type):
    torch.manual_seed(0)
    model = tiny_model(cell_type).train()
    ids = torch.randint(2, 50, (8, 12))
    target = torch.nn.functional.normalize(torch.randn(8, 12, 16), dim=-1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(100):
        out = model(ids).last_hidden_state
        loss = 1 - torch.nn.functional.cosine_similarity(out, target, dim=-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], (losses[0], losses[-1])


def test_ten_thousand_steps_stay_finite(cell_type):
    model = tiny_model(cell_type)
    with torch.no_grad():
        for param in model.parameters():  # large weights make overflow likely if the state can grow
            param.mul_(3.0)
        out = model(torch.randint(2, 50, (2, 10_000)), use_cache=True)
    assert torch.isfinite(out.last_hidden_state).all()
    assert all(torch.isfinite(t).all() for t in out.past_state.cell_state)


def test_linear_attention_state_is_a_running_mean():
    model = tiny_model("linear_attention", num_hidden_layers=1)
    with torch.no_grad():
        short = model(torch.randint(2, 50, (1, 10)), use_cache=True).past_state.cell_state
        long = model(torch.randint(2, 50, (1, 5000)), use_cache=True).past_state.cell_state
    # S and z are means of phi(k) v^T and phi(k): bounded, not growing with the step count.
    assert long[0].abs().max() < 10 * short[0].abs().max() + 1.0
    assert float(long[2]) == 5000.0


def test_every_cell_is_a_model_choice(cell_type):
    assert isinstance(tiny_model(cell_type), TF2RNNModel)
