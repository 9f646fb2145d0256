"""The model's contract: chunked == whole, padding invariance, the cache object, bad inputs."""

import pytest
import torch
from conftest import tiny_config, tiny_model

from tf2rnn_hf import TF2RNNConfig, TF2RNNModel, TF2RNNState

BATCH, STEPS = 4, 11


def _batch(padding: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 50, (BATCH, STEPS), generator=g)
    mask = torch.ones(BATCH, STEPS, dtype=torch.long)
    lengths = [STEPS, 7, 3, 1]
    for row, n in enumerate(lengths):
        if padding == "right":
            mask[row, n:] = 0
        elif padding == "left":
            mask[row, : STEPS - n] = 0
    return ids, mask


@pytest.mark.parametrize("padding", ["none", "left", "right"])
def test_chunked_equals_whole(cell_type, padding):
    model = tiny_model(cell_type)
    ids, mask = _batch(padding)
    with torch.no_grad():
        whole = model(ids, attention_mask=mask, use_cache=True)
        for splits in ([1] * STEPS, [3, 8], [5, 1, 5], [10, 1]):
            state, pieces, pooled, start = None, [], None, 0
            for size in splits:
                out = model(ids[:, start:start + size], attention_mask=mask[:, start:start + size],
                            past_state=state, use_cache=True)
                state, pooled, start = out.past_state, out.pooler_output, start + size
                pieces.append(out.last_hidden_state)
            assert (torch.cat(pieces, 1) - whole.last_hidden_state).abs().max() <= 1e-5, splits
            assert (pooled - whole.pooler_output).abs().max() <= 1e-5, splits


def test_padding_never_changes_a_result(cell_type):
    model = tiny_model(cell_type)
    ids = torch.randint(2, 50, (1, 6))
    with torch.no_grad():
        alone = model(ids).pooler_output
        for pad_left, pad_right in ((3, 0), (0, 4), (2, 2)):
            padded = torch.cat([torch.zeros(1, pad_left, dtype=torch.long), ids,
                                torch.zeros(1, pad_right, dtype=torch.long)], 1)
            mask = (torch.arange(padded.shape[1]) >= pad_left) & (torch.arange(padded.shape[1]) < pad_left + 6)
            out = model(padded, attention_mask=mask.long()[None]).pooler_output
            assert (out - alone).abs().max() <= 1e-5
        # Special tokens listed in skip_token_ids are no-ops, like [CLS] ... [SEP] from a tokenizer.
        wrapped = torch.cat([torch.tensor([[1]]), ids, torch.tensor([[1]])], 1)
        assert (model(wrapped).pooler_output - alone).abs().max() <= 1e-5


def test_step_matches_forward(cell_type):
    model = tiny_model(cell_type)
    ids = torch.randint(2, 50, (3, 9))
    with torch.no_grad():
        whole = model(ids).last_hidden_state
        state = None
        for t in range(9):
            emb, state = model.step(ids[:, t], state)
            assert (emb - whole[:, t]).abs().max() <= 1e-5


def test_outputs_are_unit_vectors_with_hidden_states():
    model = tiny_model("gru")
    out = model(torch.randint(2, 50, (2, 5)), output_hidden_states=True)
    assert out.last_hidden_state.shape == (2, 5, 16)
    assert torch.allclose(out.last_hidden_state.norm(dim=-1), torch.ones(2, 5), atol=1e-5)
    assert len(out.hidden_states) == 1 + 2 and out.hidden_states[-1].shape == (2, 5, 24)


def test_state_select_reorder_concat_reset_to():
    model = tiny_model("lstm")
    ids = torch.randint(2, 50, (3, 6))
    with torch.no_grad():
        out = model(ids, use_cache=True)
        state = out.past_state
        # Reordered rows continue exactly like the original rows.
        perm = [2, 0, 1]
        nxt = torch.randint(2, 50, (3, 4))
        cont = model(nxt, past_state=state, use_cache=True).pooler_output
        cont_perm = model(nxt[perm], past_state=state.index_select(perm)).pooler_output
        assert torch.allclose(cont_perm, cont[perm], atol=1e-6)
        both = TF2RNNState.concat([state.index_select([0]), state.index_select([1, 2])])
        assert torch.allclose(model(nxt, past_state=both).pooler_output, cont, atol=1e-6)
        # A reset row behaves like a fresh text; the others keep their history.
        reset = state.reset([1])
        fresh = model(nxt[1:2]).pooler_output
        after = model(nxt, past_state=reset).pooler_output
        assert torch.allclose(after[1], fresh[0], atol=1e-6)
        assert torch.allclose(after[0], cont[0], atol=1e-6)
        half = state.to(dtype=torch.float64)
        assert half.dtype == torch.float64 and half.seen_tokens.dtype == torch.long
        assert not state.detach().last_embedding.requires_grad
        assert state.nbytes() > 0 and "batch_size=3" in repr(state)


def test_empty_sequence_is_a_documented_no_op(cell_type):
    model = tiny_model(cell_type)
    empty = torch.zeros(2, 0, dtype=torch.long)
    out = model(empty, use_cache=True)
    assert out.last_hidden_state.shape == (2, 0, 16)
    assert torch.equal(out.pooler_output, torch.zeros(2, 16))
    ids = torch.randint(2, 50, (2, 4))
    state = model(ids, use_cache=True).past_state
    again = model(empty, past_state=state, use_cache=True)
    assert torch.equal(again.pooler_output, state.last_embedding)
    # A row with every position masked keeps the zero embedding, never NaN.
    masked = model(ids, attention_mask=torch.zeros_like(ids)).pooler_output
    assert torch.isfinite(masked).all() and torch.equal(masked, torch.zeros(2, 16))


@pytest.mark.parametrize("steps", [4, STEPS])  # tova's 5 slots: the parallel form alone, then with eviction
def test_a_forward_without_cache_equals_one_with_it_from_a_state_that_holds_no_memory(cell_type, steps):
    """use_cache=False (every training step) starts from an empty state whose tensors are one expanded zero each
    (a cell writing it in place would raise) and returns none, with the outputs and gradients of use_cache=True."""
    ids, mask = (x[:, :steps] for x in _batch("right"))
    model = tiny_model(cell_type)
    states, results = [], []
    hook = model.cell.register_forward_pre_hook(lambda module, args: states.append(args[1]))
    for use_cache in (True, False):
        out = model(ids, attention_mask=mask, use_cache=use_cache)
        out.last_hidden_state.pow(3).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        results.append((out.last_hidden_state.detach(), out.pooler_output.detach(), grads, out.past_state))
    hook.remove()
    assert all(t.stride(0) != 0 for t in states[0]) and all(t.stride() == (0,) * t.dim() for t in states[1])
    (cached, cached_pooled, cached_grads, cache), (plain, plain_pooled, plain_grads, none) = results
    assert cache is not None and none is None
    assert (plain - cached).abs().max() <= 1e-6 and (plain_pooled - cached_pooled).abs().max() <= 1e-6
    assert cached_grads.keys() == plain_grads.keys()
    assert all((plain_grads[n] - g).abs().max() <= 1e-5 for n, g in cached_grads.items())


def test_bad_inputs_raise_clear_errors():
    model = tiny_model("gru")
    ids = torch.randint(2, 50, (2, 4))
    state = model(ids, use_cache=True).past_state
    with pytest.raises(ValueError, match="past_state holds 2 rows but input_ids has 3"):
        model(torch.randint(2, 50, (3, 4)), past_state=state)
    with pytest.raises(ValueError, match="dtype"):
        model(ids, past_state=state.to(dtype=torch.float64))
    with pytest.raises(ValueError, match=r"outside the vocabulary \[0, 50\): \[50, 99\]"):
        model(torch.tensor([[3, 50, 99]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(torch.tensor([[-1, 3]]))
    with pytest.raises(ValueError, match="shape"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="TF2RNNState"):
        model(ids, past_state=(torch.zeros(2, 1),))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(cell_type="transformer"), "Unknown cell_type 'transformer'; choose one of gru, lstm, linear_attention"),
        (dict(hidden_size=0), "hidden_size must be a positive integer"),
        (dict(num_hidden_layers=-1), "num_hidden_layers must be a positive integer"),
        (dict(teacher_hidden_size=384), r"output_size \(16\) differs from the teacher's embedding size \(384\)"),
        (dict(cell_type="rem", hidden_size=30), "divisible by num_attention_heads"),
        (dict(skip_token_ids=[77]), "outside the vocabulary"),
        (dict(dropout=1.5), "dropout"),
        (dict(cell_type="lstm", residual_layers=True), "residual_layers stacks gru layers"),
        (dict(readout_hidden_size=0), "readout_hidden_size must be a positive integer"),
    ],
)
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**{"cell_type": "gru", **overrides})


def test_config_round_trip(tmp_path):
    config = tiny_config("rem")
    config.save_pretrained(tmp_path)
    loaded = TF2RNNConfig.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()


def test_gradients_flow_through_every_parameter(cell_type):
    model = tiny_model(cell_type).train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 50, (2, 6), generator=g)
    # A student with tail_layers trains its adapter through its second embedding, which word starts bring out.
    tail = getattr(model.config, "tail_layers", None) is not None
    out = model(ids, **({"word_starts": torch.randint(0, 2, ids.shape, generator=g)} if tail else {}))
    # A random direction: the sum of unit vectors' entries could leave some gradients exactly zero.
    loss = (out.last_hidden_state * torch.randn(out.last_hidden_state.shape, generator=g)).sum()
    if tail:
        loss = loss + (out.tail_hidden_state * torch.randn(out.tail_hidden_state.shape, generator=g)).sum()
    loss.backward()
    silent = [n for n, p in model.named_parameters() if p.grad is None or not bool(p.grad.abs().sum() > 0)]
    assert not silent, silent
    assert isinstance(model, TF2RNNModel)
