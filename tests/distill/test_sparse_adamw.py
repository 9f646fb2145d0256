"""RowSparseAdamW and the sparse-aware gradient clip: AdamW's arithmetic on the rows read, nothing on the rest."""

import pytest
import torch

from tf2rnn_hf.distill.sparse_adamw import RowSparseAdamW, clip_grad_norm_

VOCAB, DIM = 40, 6


def _pair(sparse: bool, seed: int = 0):
    torch.manual_seed(seed)
    table, head = torch.nn.Embedding(VOCAB, DIM, sparse=sparse), torch.nn.Linear(DIM, 2)
    return table, head


def _backward(table, head, ids):
    (head(table(ids)).square().sum()).backward()


@pytest.mark.parametrize("fused", [False, True])
def test_equals_adamw_when_every_row_is_read(fused):
    (s_table, s_head), (d_table, d_head) = _pair(True), _pair(False)
    sparse = RowSparseAdamW([*s_table.parameters(), *s_head.parameters()], lr=1e-2, weight_decay=0.1, fused=fused)
    dense = torch.optim.AdamW([*d_table.parameters(), *d_head.parameters()], lr=1e-2, weight_decay=0.1, fused=fused)
    gen = torch.Generator().manual_seed(1)
    for _ in range(6):
        ids = torch.cat([torch.arange(VOCAB), torch.randint(0, VOCAB, (25,), generator=gen)])  # repeats summed
        for table, head, opt in ((s_table, s_head, sparse), (d_table, d_head, dense)):
            opt.zero_grad()
            _backward(table, head, ids)
            opt.step()
    assert s_table.weight.grad is None or s_table.weight.grad.is_sparse
    torch.testing.assert_close(s_table.weight, d_table.weight, rtol=0, atol=1e-6)
    torch.testing.assert_close(s_head.weight, d_head.weight, rtol=0, atol=1e-6)
    assert set(sparse.state[s_table.weight]) == set(dense.state[d_table.weight])  # checkpoints load into either


def test_rows_not_read_keep_weights_and_moments_where_adamw_would_move_them():
    (s_table, s_head), (d_table, d_head) = _pair(True), _pair(False)
    sparse = RowSparseAdamW([*s_table.parameters(), *s_head.parameters()], lr=1e-2)
    dense = torch.optim.AdamW([*d_table.parameters(), *d_head.parameters()], lr=1e-2)
    every, few = torch.arange(VOCAB), torch.tensor([0, 3, 3, 7])
    for ids in (every, few):
        before, moments = s_table.weight.detach().clone(), sparse.state[s_table.weight].get("exp_avg")
        moments = None if moments is None else moments.clone()
        for table, head, opt in ((s_table, s_head, sparse), (d_table, d_head, dense)):
            opt.zero_grad()
            _backward(table, head, ids)
            opt.step()
    unread = torch.ones(VOCAB, dtype=torch.bool)
    unread[few] = False
    assert torch.equal(s_table.weight[unread], before[unread])
    assert torch.equal(sparse.state[s_table.weight]["exp_avg"][unread], moments[unread])
    assert not torch.equal(s_table.weight[~unread], before[~unread])
    # Dense AdamW's momentum moves the unread rows too: the lazy update is a real difference, not a no-op.
    assert (d_table.weight[unread] - s_table.weight[unread]).abs().max() > 1e-4
    # The rows read had the same history in both (all rows in step 1), so they agree.
    torch.testing.assert_close(s_table.weight[~unread], d_table.weight[~unread], rtol=0, atol=1e-6)


def test_a_checkpoint_of_the_sparse_update_loads_into_adamw():
    table, head = _pair(True)
    opt = RowSparseAdamW([*table.parameters(), *head.parameters()], lr=1e-2)
    _backward(table, head, torch.arange(VOCAB))
    opt.step()
    other = torch.optim.AdamW([*table.parameters(), *head.parameters()], lr=1e-2)
    other.load_state_dict(opt.state_dict())
    assert float(other.state_dict()["state"][0]["step"]) == 1.0


def test_unsupported_adamw_options_are_refused():
    with pytest.raises(ValueError, match="amsgrad"):
        RowSparseAdamW(torch.nn.Linear(2, 2).parameters(), amsgrad=True)


@pytest.mark.parametrize("max_norm", [0.05, 1e3, float("inf")])
def test_clip_matches_torchs_clip_on_the_dense_gradients(max_norm):
    (s_table, s_head), (d_table, d_head) = _pair(True), _pair(False)
    ids = torch.tensor([1, 2, 2, 2, 9, 30])  # a repeated row: its entries must be summed before the norm
    _backward(s_table, s_head, ids)
    _backward(d_table, d_head, ids)
    got = clip_grad_norm_([*s_table.parameters(), *s_head.parameters()], max_norm)
    want = torch.nn.utils.clip_grad_norm_([*d_table.parameters(), *d_head.parameters()], max_norm)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(s_table.weight.grad.to_dense(), d_table.weight.grad)
    torch.testing.assert_close(s_head.weight.grad, d_head.weight.grad)


def test_lazy_rows_of_a_dense_gradient_equal_the_sparse_update():
    """What several processes do (DDP all-reduces the table's gradient dense): a `lazy_rows` parameter's dense
    gradient updates its nonzero rows exactly as the row-sparse gradient of the same reads would."""
    (s_table, s_head), (d_table, d_head) = _pair(True), _pair(False)
    sparse = RowSparseAdamW([*s_table.parameters(), *s_head.parameters()], lr=1e-2, weight_decay=0.1)
    lazy = RowSparseAdamW([*d_table.parameters(), *d_head.parameters()], lr=1e-2, weight_decay=0.1,
                          lazy_rows=[d_table.weight])
    start = d_table.weight.detach().clone()
    for ids in (torch.tensor([0, 3, 3, 7]), torch.tensor([3, 9, 12]), torch.tensor([0, 1])):
        for table, head, opt in ((s_table, s_head, sparse), (d_table, d_head, lazy)):
            opt.zero_grad()
            _backward(table, head, ids)
            opt.step()
    assert not d_table.weight.grad.is_sparse
    torch.testing.assert_close(d_table.weight, s_table.weight, rtol=0, atol=0)
    torch.testing.assert_close(lazy.state[d_table.weight]["exp_avg"], sparse.state[s_table.weight]["exp_avg"],
                               rtol=0, atol=0)
    torch.testing.assert_close(d_head.weight, s_head.weight, rtol=0, atol=0)
    never = torch.ones(VOCAB, dtype=torch.bool)
    never[[0, 1, 3, 7, 9, 12]] = False
    assert torch.equal(d_table.weight[never], start[never])  # weight decay too waits for a row's read


def test_lazy_rows_must_be_the_optimizers_own():
    with pytest.raises(ValueError, match="lazy_rows"):
        RowSparseAdamW(torch.nn.Linear(2, 2).parameters(), lazy_rows=[torch.nn.Parameter(torch.zeros(2, 2))])
