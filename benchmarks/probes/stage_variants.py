"""Probe: a change to the student tried as a second stage before anyone builds it in. `examples/distill.py`'s recipe
runs with one change grafted on, chosen by `STAGE_VARIANT`; every other argument goes to the recipe as given
(`student.sh` runs them as its `second_stage` rows, 3,000 steps from the release-budget control, or as rows of their
own). The two grafts (`readout-mlp`, `last-token`) start at zero, so their step 0 is the control itself and the row
measures what training them buys; such a student is kept as a state dict (`state.pt`: the saved format has no place
for the graft) and scored by the recipe's own held-out table (results.json), not by `tf2rnn evaluate`.
`decay-to-init` changes only the optimizer, so its student is saved and scored as any other.

- `readout-mlp`: the readout plus a residual MLP (384 -> 768 -> GELU -> 384) on the pooled mean: a nonlinear
  correction of what the causal layers pooled.
- `last-token`: the pooled mean plus a learned map of the newest token's top-layer output, which alone has read the
  whole prefix (the readout then reads both; a linear readout of the pair).
- `decay-to-init`: AdamW's decoupled decay centred on the starting weights instead of zero (L2-SP, Li et al. 2018):
  after each step p -= lr * STAGE_DECAY * (p - p0) for every trained parameter but the token table. The inherited
  layers stay near the teacher's unless the loss keeps moving them; the left-out-source gap grew with the budget
  as the layers moved 20-33% (make distill's budget) and 50-78% (the release's) of their norm away from the teacher's.
- `attention-free`: the student's layers named by `STAGE_LAYERS` (indices from 0, comma-separated) keep their
  feed-forward block and norms but attend to nothing (the attention's output map reads zeros: its bias alone), as
  He et al. 2024 ("What Matters in Transformers? Not All Attention is Needed") drop a trained model's attention
  layers. A third layer's feed-forward without its attention, cache and eviction: what the feed-forward alone buys.
  Works on a fresh student and on --init_from; scored by the recipe's held-out table (the saved format runs every
  layer's attention). The flagged layer's query/key/value products still run, so its training time is not the shape's.

    STAGE_VARIANT=last-token python benchmarks/probes/stage_variants.py --init_from outputs/STUDENT ... \
        --output_dir outputs/NAME
    STAGE_VARIANT=decay-to-init STAGE_DECAY=10 python benchmarks/probes/stage_variants.py ... --output_dir outputs/NAME
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

import tf2rnn_hf.distill.recipe as recipe
from tf2rnn_hf.distill.trainer import DistillationTrainer
from tf2rnn_hf.models.tf2rnn.cells_tf2rnn import TOVAAttentionCell, _PostNormLayer


class ResidualMLPReadout(nn.Module):
    """`linear(x) + down(gelu(up(x)))`, `down` zero at first."""

    def __init__(self, linear: nn.Linear, width: int = 768):
        super().__init__()
        self.linear = linear
        self.up, self.down = nn.Linear(linear.in_features, width), nn.Linear(width, linear.out_features)
        nn.init.zeros_(self.down.weight)
        nn.init.zeros_(self.down.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.down(F.gelu(self.up(x)))


def _graft(change) -> None:
    """Apply `change(model)` to the student the recipe loads with --init_from."""
    load = recipe.TF2RNNForDistillation.from_pretrained.__func__

    def from_pretrained(cls, *args, **kwargs):
        model = load(cls, *args, **kwargs)
        change(model)
        return model
    recipe.TF2RNNForDistillation.from_pretrained = classmethod(from_pretrained)


def readout_mlp() -> None:
    _graft(lambda model: setattr(model, "readout", ResidualMLPReadout(model.readout)))


def last_token() -> None:
    pooled_output = TOVAAttentionCell._pooled_output

    def with_last(self, x, valid, means, state):
        output, pooling_state = pooled_output(self, x, valid, means, state)
        return output + self.last_token(x), pooling_state

    def add(model) -> None:
        h = model.config.hidden_size
        model.cell.last_token = nn.Linear(h, h)
        nn.init.zeros_(model.cell.last_token.weight)
        nn.init.zeros_(model.cell.last_token.bias)
    TOVAAttentionCell._pooled_output = with_last
    _graft(add)


def decay_to_init() -> None:
    strength = float(os.environ["STAGE_DECAY"])
    create_optimizer = DistillationTrainer.create_optimizer

    def with_decay(self, *args, **kwargs):
        optimizer = create_optimizer(self, *args, **kwargs)
        table = self.model.get_input_embeddings().weight
        anchors = {p: p.detach().clone() for p in self.model.parameters() if p.requires_grad and p is not table}

        @torch.no_grad()
        def decay(opt, *_):
            for group in opt.param_groups:
                params = [p for p in group["params"] if p in anchors]
                if params:
                    torch._foreach_add_(params, torch._foreach_sub(params, [anchors[p] for p in params]),
                                        alpha=-group["lr"] * strength)
        optimizer.register_step_post_hook(decay)
        print(f"decay to init {strength} on {sum(p.numel() for p in anchors)} parameters", file=sys.stderr)
        return optimizer
    DistillationTrainer.create_optimizer = with_decay


_MIX = _PostNormLayer.mix


def mix_or_nothing(self, q, k, v, keys, values, allowed, need_weights=True):
    """`_PostNormLayer.mix`, or zeros (and zero weights) for a layer flagged `attention_free`."""
    if not getattr(self, "attention_free", False):
        return _MIX(self, q, k, v, keys, values, allowed, need_weights)
    b, t = allowed.shape[:2]
    weights = q.new_zeros(b, self.heads, t, 1 + allowed.shape[-1]) if need_weights else None
    return q.new_zeros(b, t, q.shape[-1]), weights


def attention_free() -> None:
    chosen = [int(i) for i in os.environ["STAGE_LAYERS"].split(",")]

    def flag(model) -> None:
        for i in chosen:
            model.cell.layers[i].attention_free = True
        print(f"attention-free layers {chosen} of {len(model.cell.layers)}", file=sys.stderr)
    _PostNormLayer.mix = mix_or_nothing
    _graft(flag)
    build = recipe.build_student

    def build_flagged(*args, **kwargs):
        model, tokenizer = build(*args, **kwargs)
        flag(model)
        return model, tokenizer
    recipe.build_student = build_flagged


VARIANTS = {"readout-mlp": readout_mlp, "last-token": last_token, "decay-to-init": decay_to_init,
            "attention-free": attention_free}


def _save_state(self, output_dir=None, _internal_call=False) -> None:
    path = output_dir or self.args.output_dir
    os.makedirs(path, exist_ok=True)
    torch.save(self.model.state_dict(), os.path.join(path, "state.pt"))


if __name__ == "__main__":
    VARIANTS[os.environ["STAGE_VARIANT"]]()
    if os.environ["STAGE_VARIANT"] != "decay-to-init":  # a grafted or altered student has no saved format
        DistillationTrainer.save_model = _save_state
        recipe.write_card = lambda *args, **kwargs: None
    recipe.main()
