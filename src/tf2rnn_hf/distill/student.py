"""The student: built from a teacher, and the distillation's view of it (`TF2RNNForDistillation`), which
adds what only training needs: a map from a teacher embedding to a cell state, and teacher forcing."""

import copy
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn
from transformers import ByT5Tokenizer, PreTrainedTokenizerBase
from transformers.tokenization_utils_base import VERY_LARGE_INTEGER

from ..data.teacher import BUILT_IN, Teacher
from ..models import TF2RNNConfig, TF2RNNModel, TF2RNNModelOutput
from ..utils import pad_ids
from .quantization_aware import is_learned_scale


class TF2RNNForDistillation(TF2RNNModel):
    """A `TF2RNNModel` that can also run teacher-forced, for the teacher-transition loss and scheduled
    sampling. With `config.state_lift` it holds `state_lift`, a learned map from a teacher embedding to a
    cell state (`gru`/`lstm`). It saves as a plain `TF2RNNModel` (its checkpoints keep the lift, which
    `TF2RNNModel` ignores on load), so whatever trained it, users load the same model class.
    """

    def __init__(self, config: TF2RNNConfig):
        super().__init__(config)
        self.state_lift = None
        if config.state_lift:
            shapes = self.cell.state_shapes()
            self.state_lift = nn.Linear(config.output_size, sum(a * b for a, b in shapes))
            self.post_init()

    def forward(self, input_ids: torch.LongTensor, attention_mask: Optional[torch.Tensor] = None,
                teacher_states: Optional[torch.Tensor] = None, teacher_forcing: Optional[torch.Tensor] = None,
                return_dict: Optional[bool] = None, **kwargs):
        r"""`TF2RNNModel.forward`, or with `teacher_states` ([batch, steps, output_size], the teacher's
        embedding after each step) teacher-forced: the state before step t is lifted from
        `teacher_states[:, t-1]` wherever `teacher_forcing[:, t]` is true (default all: the parallel
        teacher-transition mode; some: scheduled sampling). Rows must be right-padded; no `past_state`."""
        if teacher_states is None:
            return super().forward(input_ids, attention_mask=attention_mask, return_dict=return_dict, **kwargs)
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._check_inputs(input_ids, None)
        preds = self._teacher_forced(input_ids, attention_mask, teacher_states, teacher_forcing)
        last = (self.step_mask(input_ids, attention_mask).sum(1) - 1).clamp(min=0)
        pooled = preds[torch.arange(len(preds)), last]
        return TF2RNNModelOutput(last_hidden_state=preds, pooler_output=pooled) if return_dict else (preds, pooled)

    def _lift_cell(self, embedding: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        if self.state_lift is None:
            raise ValueError("Teacher forcing needs a state_lift; build the student with state_lift=True "
                             "(gru/lstm cells).")
        flat = self.state_lift(embedding)
        tensors, start = [], 0
        for i, shape in enumerate(self.cell.state_shapes()):
            size = shape[0] * shape[1]
            part = flat[..., start:start + size].reshape(*flat.shape[:-1], *shape)
            tensors.append(torch.tanh(part) if i == 0 else part)  # h is a tanh output; an LSTM's c is not
            start += size
        return tuple(tensors)

    def _teacher_forced(self, input_ids, attention_mask, teacher_states, teacher_forcing) -> torch.Tensor:
        """Embeddings after each step when the state before step t is lifted from the teacher's e(t-1)
        where `teacher_forcing` says so (see `forward`)."""
        mask = self.step_mask(input_ids, attention_mask)
        batch, steps = input_ids.shape
        lengths = mask.sum(1)
        if not torch.equal(mask, torch.arange(steps, device=mask.device)[None] < lengths[:, None]):
            raise ValueError("Teacher forcing needs right-padded rows without skipped tokens inside.")
        force = torch.ones_like(mask) if teacher_forcing is None else teacher_forcing.bool()
        force = force & mask
        vectors = self.embeddings(input_ids) * mask[..., None].to(teacher_states.dtype)
        counts = torch.cumsum(mask.long(), 1).clamp(min=1)[..., None].to(vectors.dtype)
        means = torch.cumsum(vectors, 1) / counts
        prev = torch.cat([torch.zeros_like(teacher_states[:, :1]), teacher_states[:, :-1]], 1)
        first = (torch.arange(steps, device=mask.device) == 0)[None].expand(batch, -1)

        def lifted(e, is_first):
            # Before the first step the state is the initial (zero) state, not a lift.
            return tuple(torch.where(is_first.view(-1, *([1] * (a.dim() - 1))), torch.zeros_like(a), a)
                         for a in self._lift_cell(e))

        x = self.dropout(vectors)
        if bool(force[mask].all()):  # every step teacher-forced: all steps at once, no recurrence
            bi, ti = mask.nonzero(as_tuple=True)
            out, _ = self.cell.step(x[bi, ti], lifted(prev[bi, ti], first[bi, ti]))
            raw = self.readout(out)
            if self.config.residual_token_mean:
                raw = raw + means[bi, ti]
            preds = teacher_states.new_zeros(batch, steps, self.config.output_size)
            preds[bi, ti] = F.normalize(raw, dim=-1)
            return preds
        state, outs = self.cell.init_state(batch, device=input_ids.device, dtype=vectors.dtype), []
        for t in range(steps):  # scheduled sampling: restart some rows from the teacher's state
            restart = force[:, t]
            lift = lifted(prev[:, t], first[:, t])
            state = tuple(torch.where(restart.view(-1, *([1] * (a.dim() - 1))), b, a) for a, b in zip(state, lift))
            out, new = self.cell.step(x[:, t], state)
            live = mask[:, t]
            state = tuple(torch.where(live.view(-1, *([1] * (a.dim() - 1))), b, a) for a, b in zip(state, new))
            outs.append(out)
        raw = self.readout(torch.stack(outs, 1))
        if self.config.residual_token_mean:
            raw = raw + means
        return F.normalize(raw, dim=-1) * mask[..., None].to(raw.dtype)

    def save_pretrained(self, save_directory, *args, state_dict=None, **kwargs) -> None:
        """Save as a plain `TF2RNNModel` (its class, auto_map and custom code), keeping the lift's weights."""
        self.check_savable()
        with torch.device("meta"):
            plain = TF2RNNModel(self.config)
        state = self.state_dict() if state_dict is None else state_dict
        plain.load_state_dict({k: v for k, v in state.items()
                               if not k.startswith("state_lift.") and not is_learned_scale(k)}, assign=True)
        plain.save_pretrained(save_directory, *args, state_dict=state, **kwargs)


TOKEN_INITS = ("teacher_outputs", "input_embeddings", "random", "layer_inputs")
# Cells that are the teacher's own layers: build_student copies the teacher into them.
INHERITED_CELLS = ("tova_attention",)


def build_student(teacher: Union[str, Teacher] = BUILT_IN, cell_type: str = "gru", hidden_size: Optional[int] = None,
                  num_hidden_layers: Optional[int] = None, token_init: Optional[str] = None,
                  teacher_layers: Optional[Sequence[int]] = None,
                  calibration_texts: Optional[Sequence[str]] = None, **config_kwargs
                  ) -> Tuple["TF2RNNForDistillation", PreTrainedTokenizerBase]:
    """A fresh student of `teacher` (`"built-in"`, a folder, a Hub id or a loaded `Teacher`) and its tokenizer.

    The student is a `TF2RNNForDistillation`: a `TF2RNNModel` that the distillation losses can also run
    teacher-forced, and that saves and loads as a plain `TF2RNNModel`. `config_kwargs` go to `TF2RNNConfig`.
    Defaults: one layer of width 768 for the recurrent cells.

    `token_init="teacher_outputs"` (default) starts each token's vector at the teacher's embedding of that
    token alone: that is exactly the teacher's embedding of a one-token prefix, so with the mean-pooling
    readout the student's first step already matches the teacher and later steps start at the static
    order-free baseline (a prototype measured +0.02 final cosine over input-embedding init).
    `"input_embeddings"` copies the teacher's word-embedding table (cheaper, context-free);
    `"random"` keeps the normal initialisation.

    `cell_type="tova_attention"` inherits the teacher instead (see `inherit_teacher`): its word and position
    embeddings (or, with `token_init="layer_inputs"`, what its first copied layer reads for each token alone), and
    `teacher_layers` (default: `num_hidden_layers` of them evenly spaced, all by default) with
    their attention made causal. Its width and heads are the teacher's; its feed-forward size is too unless
    `intermediate_size` asks for fewer neurons, which keeps each layer's most important ones as the teacher
    runs `calibration_texts` (see `prune_feed_forward`).
    """
    inherited = cell_type in INHERITED_CELLS
    token_init = token_init or ("input_embeddings" if inherited else "teacher_outputs")
    if token_init not in TOKEN_INITS:
        raise ValueError(f"Unknown token_init {token_init!r}; choose one of {', '.join(TOKEN_INITS)}.")
    teacher = teacher if isinstance(teacher, Teacher) else Teacher(teacher)
    if inherited:
        layers = _teacher_layer_choice(teacher, num_hidden_layers, teacher_layers)
        tc = teacher.model.config
        if hidden_size not in (None, tc.hidden_size):
            raise ValueError(f"cell_type {cell_type!r} has the teacher's width {tc.hidden_size}, not hidden_size="
                             f"{hidden_size}.")
        if token_init not in ("input_embeddings", "layer_inputs"):
            raise ValueError(f"cell_type {cell_type!r} reads the teacher's input embeddings or its first copied "
                             f"layer's inputs; token_init={token_init!r} does not apply.")
        shape = dict(num_attention_heads=tc.num_attention_heads, layer_norm_eps=tc.layer_norm_eps,
                     max_position_embeddings=tc.max_position_embeddings, embedding_size=tc.hidden_size)
        for key, value in shape.items():
            if config_kwargs.get(key, value) != value:
                raise ValueError(f"cell_type {cell_type!r} has the teacher's {key} {value}, not {config_kwargs[key]}.")
        neurons = config_kwargs.get("intermediate_size") or tc.intermediate_size
        if not isinstance(neurons, int) or not 0 < neurons <= tc.intermediate_size:
            raise ValueError(f"cell_type {cell_type!r} keeps up to the teacher's {tc.intermediate_size} feed-forward "
                             f"neurons; intermediate_size={neurons!r} is not between 1 and that.")
        if neurons < tc.intermediate_size and not calibration_texts:
            raise ValueError(f"intermediate_size={neurons} keeps the teacher's most active feed-forward neurons: pass "
                             "calibration_texts (a few hundred of the texts it will be distilled on) to measure them.")
        shape.update(intermediate_size=neurons)
        config_kwargs.update(shape, hidden_size=tc.hidden_size, num_hidden_layers=len(layers))
        config_kwargs.setdefault("residual_token_mean", False)
    elif teacher_layers is not None or calibration_texts is not None:
        given = "teacher_layers" if teacher_layers is not None else "calibration_texts"
        raise ValueError(f"{given} applies to the cells that inherit the teacher ({', '.join(INHERITED_CELLS)}), "
                         f"not {cell_type!r}.")
    elif token_init == "layer_inputs":
        raise ValueError(f"token_init='layer_inputs' starts a student that inherits the teacher's layers "
                         f"({', '.join(INHERITED_CELLS)}) at what its first layer reads; not {cell_type!r}.")
    else:
        config_kwargs.update(hidden_size=hidden_size or 768, num_hidden_layers=num_hidden_layers or 1)
    config_kwargs.update(cell_type=cell_type)
    if config_kwargs.get("granularity") == "byte":
        if inherited:
            raise ValueError(f"cell_type {cell_type!r} steps over the teacher's tokens; granularity='byte' does "
                             "not apply.")
        return _byte_student(teacher, token_init, **config_kwargs)
    tokenizer = copy.deepcopy(teacher.tokenizer)
    tokenizer.model_max_length = VERY_LARGE_INTEGER  # the student reads whole texts (the teacher cuts at 256)
    config = TF2RNNConfig(
        vocab_size=len(tokenizer),
        output_size=teacher.dim,
        teacher_hidden_size=teacher.dim,
        skip_token_ids=teacher.special_ids(),
        pad_token_id=tokenizer.pad_token_id,
        teacher_name_or_path=teacher.hub_id,
        **config_kwargs,
    )
    model = TF2RNNForDistillation(config)
    if inherited:
        kept = None
        if config.intermediate_size < teacher.model.config.intermediate_size:
            kept = prune_feed_forward(teacher, layers, config.intermediate_size, calibration_texts)
        inherit_teacher(model, teacher, layers, kept, layer_inputs=token_init == "layer_inputs")
        return model, tokenizer
    table = model.get_input_embeddings().weight
    with torch.no_grad():
        if token_init == "teacher_outputs":
            table.copy_(teacher.token_vectors().to(table.dtype))
        elif token_init == "input_embeddings":
            source = teacher.model.get_input_embeddings().weight
            if source.shape != table.shape:
                raise ValueError(f"input_embeddings init needs a table of shape {tuple(source.shape)}, "
                                 f"the student has {tuple(table.shape)}.")
            table.copy_(source.detach().to(table.dtype))
    return model, tokenizer


def _teacher_layer_choice(teacher: Teacher, num_hidden_layers: Optional[int],
                          teacher_layers: Optional[Sequence[int]]) -> List[int]:
    """Which teacher layers an inherited student copies: given, or `num_hidden_layers` evenly spaced
    ending at the last (all of them by default)."""
    total = getattr(teacher.model.config, "num_hidden_layers", None)
    if not _is_bert_shaped(teacher.model):
        raise ValueError(f"Teacher {teacher.name} is a {type(teacher.model).__name__}; inheriting its layers needs a "
                         "BERT-shaped encoder (BERT, MiniLM: absolute positions, GELU).")
    if teacher_layers is None:
        n = num_hidden_layers or total
        if not 1 <= n <= total:
            raise ValueError(f"num_hidden_layers must be between 1 and the teacher's {total}, got {n}.")
        return [round((i + 1) * total / n) - 1 for i in range(n)]
    layers = [int(i) for i in teacher_layers]
    if not layers or any(not 0 <= i < total for i in layers):
        raise ValueError(f"teacher_layers must name layers in [0, {total}), got {list(teacher_layers)}.")
    if num_hidden_layers not in (None, len(layers)):
        raise ValueError(f"num_hidden_layers ({num_hidden_layers}) differs from the {len(layers)} teacher_layers.")
    return layers


def _is_bert_shaped(model: nn.Module) -> bool:
    config = model.config
    return (hasattr(model, "embeddings") and hasattr(getattr(model, "encoder", None), "layer")
            and getattr(config, "position_embedding_type", "absolute") == "absolute"
            and getattr(config, "hidden_act", None) == "gelu"
            and hasattr(model.encoder.layer[0].attention, "self"))


@torch.no_grad()
def prune_feed_forward(teacher: Teacher, layers: Sequence[int], neurons: int, texts: Sequence[str],
                       token_budget: int = 8192, ridge: float = 1e-3
                       ) -> List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """For each of `layers`, the `neurons` feed-forward neurons of the teacher to keep and the down projection
    that makes the most of them: ([neurons] indices, [hidden, neurons] weight, [hidden] bias).

    A neuron's importance is the root mean square of what it adds to the layer's output over the tokens of
    `texts` as the teacher runs them, sqrt(E[a^2]) * |down column| (the structured form of Wanda; LLM-Pruner and
    FLAP score alike). The kept neurons' down projection and bias are then refitted by least squares to the whole
    block's output on those tokens (the layer-wise reconstruction of Kwon et al. 2022; `ridge` times the mean
    activation energy regularises the weights, not the bias, so the block's mean output is kept exactly)."""
    bert = teacher.model
    size = bert.config.intermediate_size
    grams = {i: torch.zeros(size + 1, size + 1, dtype=torch.float64) for i in layers}  # of [a, 1] over tokens
    mask = {}

    def read_mask(module, args, kwargs):
        mask["real"] = kwargs["attention_mask"].bool()  # padding tokens are left out

    def hook(index):
        def record(module, inputs, output):
            a = output.double()[mask["real"]]
            a = torch.cat([a, torch.ones(len(a), 1, dtype=a.dtype, device=a.device)], 1)
            grams[index] += (a.T @ a).cpu()
        return record

    handles = [bert.register_forward_pre_hook(read_mask, with_kwargs=True)]
    handles += [bert.encoder.layer[i].intermediate.register_forward_hook(hook(i)) for i in layers]
    try:
        teacher.encode(list(texts), token_budget=token_budget)
    finally:
        for handle in handles:
            handle.remove()
    kept = []
    for i in layers:
        dense = bert.encoder.layer[i].output.dense
        gram = grams[i] / grams[i][-1, -1]  # second moments: E[a_j a_k], E[a_j], 1
        full = torch.cat([dense.weight.T, dense.bias[None]]).double().cpu()  # [size + 1, hidden]: [a, 1] -> output
        score = gram.diagonal()[:-1].sqrt() * full[:-1].norm(dim=1)
        keep = torch.argsort(score, descending=True)[:neurons].sort().values
        rows = torch.cat([keep, torch.tensor([size])])
        system = gram[rows][:, rows]
        system[:-1, :-1] += ridge * system.diagonal()[:-1].mean() * torch.eye(neurons, dtype=system.dtype)
        fitted = torch.linalg.solve(system, gram[rows] @ full)  # [neurons + 1, hidden]
        kept.append((keep, fitted[:-1].T.float(), fitted[-1].float()))
    return kept


@torch.no_grad()
def least_squares_adapter(model: TF2RNNModel, tokenizer, texts: Sequence[str], tail_layers: int,
                          max_tokens: int = 64, batch_size: int = 64, ridge: float = 1e-3
                          ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The linear map from layer `tail_layers`'s outputs to the top layer's over every token of `texts` as `model`
    runs them, by least squares ([H, H] weight, [H] bias; `ridge` times the mean input energy regularises it): the
    start of a `tail_layers` adapter. From the identity, 500 steps at lr 1e-4 left a four-layer student's second
    embedding at 0.866 all-prefix cosine; from this fit (0.875 untrained), 0.886 (docs/experiments.md, session 65)."""
    was_training = model.training
    model.eval()
    gram, cross = None, None
    ids = [i for i in (tokenizer(t, add_special_tokens=False, truncation=True, max_length=max_tokens)["input_ids"]
                       for t in texts) if i]
    for start in range(0, len(ids), batch_size):
        batch, mask = pad_ids(ids[start:start + batch_size], tokenizer.pad_token_id or 0)
        hidden = model(batch, attention_mask=mask, use_cache=False, output_hidden_states=True).hidden_states
        real = mask.bool()
        x, y = hidden[tail_layers][real].double(), hidden[-2][real].double()  # hidden: inputs, layers..., pooled
        x = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1)
        gram = x.T @ x if gram is None else gram + x.T @ x
        cross = x.T @ y if cross is None else cross + x.T @ y
    model.train(was_training)
    if gram is None:
        raise ValueError("least_squares_adapter needs texts with tokens to fit on.")
    n = gram[-1, -1]
    system = gram / n
    system[:-1, :-1] += ridge * system.diagonal()[:-1].mean() * torch.eye(len(system) - 1, dtype=system.dtype)
    fitted = torch.linalg.solve(system, cross / n)
    return fitted[:-1].T.float(), fitted[-1].float()


@torch.no_grad()
def inherit_teacher(model: TF2RNNModel, teacher: Teacher, layers: Sequence[int],
                    feed_forward: Optional[Sequence[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = None,
                    layer_inputs: bool = False) -> None:
    """Copy a BERT-shaped teacher into a `tova_attention` student: word and position embeddings, the token-type-0
    vector, the embedding norm, and for each chosen layer its Q/K/V/O, norms and feed-forward. The sinks take
    the teacher's [CLS] run alone through those layers (a causal model's first token never sees another), and the
    readout starts at the identity, so before any training the student is the teacher with causal attention. A
    bidirectional pooling term takes the top layer's Q/K/V (its output map starts at zero). `feed_forward`
    (from `prune_feed_forward`, one per layer) keeps only those neurons of each layer's feed-forward, with their
    refitted down projection. `layer_inputs`: the token table starts at what the first copied layer reads for each
    token alone (`Teacher.token_states`), held normalised under that layer's input norm, so that a student of the
    teacher's top layers starts from inputs like its own rather than raw embeddings (one layer: 0.552 final cosine
    untrained against 0.334, ahead after 7 minutes on 12,000 texts, behind after 20 on 150,000: docs/experiments.md,
    session 37)."""
    bert, cell = teacher.model, model.cell
    emb = bert.embeddings
    model.get_input_embeddings().weight.copy_(emb.word_embeddings.weight)
    cell.position_embeddings.weight.copy_(emb.position_embeddings.weight)
    cell.embedding_bias.copy_(emb.token_type_embeddings.weight[0])
    cell.embedding_norm.load_state_dict(emb.LayerNorm.state_dict())
    if layer_inputs:
        # BERT's post-norms: the state is norm.weight * z + norm.bias with z normalised, so the student's embedding
        # norm, given that norm's weights, maps z (+ the position embedding, the order a recurrence still needs) back.
        norm = bert.encoder.layer[layers[0] - 1].output.LayerNorm if layers[0] > 0 else emb.LayerNorm
        if (norm.weight.abs() < 1e-4).any():
            raise ValueError(f"token_init='layer_inputs' divides by the weights of the norm before teacher layer "
                             f"{layers[0]}, and some are ~0 in {teacher.name}; use token_init='input_embeddings'.")
        states = teacher.token_states(layers[0]).to(norm.weight.device)
        model.get_input_embeddings().weight.copy_(((states - norm.bias) / norm.weight).to(cell.embedding_bias.device))
        cell.embedding_norm.load_state_dict(norm.state_dict())
        cell.embedding_bias.zero_()
    feed_forward = feed_forward or [None] * len(layers)
    for dst, index, pruned in zip(cell.layers, layers, feed_forward):
        src = bert.encoder.layer[index]
        for mine, theirs in ((dst.query, src.attention.self.query), (dst.key, src.attention.self.key),
                             (dst.value, src.attention.self.value), (dst.out, src.attention.output.dense),
                             (dst.attention_norm, src.attention.output.LayerNorm), (dst.up, src.intermediate.dense),
                             (dst.down, src.output.dense), (dst.output_norm, src.output.LayerNorm)):
            if pruned is not None and mine is dst.up:
                mine.weight.copy_(theirs.weight[pruned[0]])
                mine.bias.copy_(theirs.bias[pruned[0]])
            elif pruned is not None and mine is dst.down:
                mine.weight.copy_(pruned[1])
                mine.bias.copy_(pruned[2])
            else:
                mine.load_state_dict(theirs.state_dict())
    # The student's own copy of the token table: the teacher may sit on a GPU while the student is built on the CPU.
    cls = model.get_input_embeddings().weight[[teacher.tokenizer.cls_token_id]]
    x = cell.embedding_norm(cls + cell.position_embeddings.weight[0] + cell.embedding_bias)
    for layer in cell.layers:
        layer.sink_key.copy_(layer.key(x)[0])
        layer.sink_value.copy_(layer.value(x)[0])
        x = layer.attention_norm(x + layer.out(layer.value(x)))  # attending to itself alone: its value
        x = layer.output_norm(x + layer.down(F.gelu(layer.up(x))))
    cell.sink_output.copy_(x[0])
    if cell.pooling is not None:  # the bidirectional pooling reads the top layer as that layer's attention did
        for mine, theirs in ((cell.pooling.query, cell.layers[-1].query), (cell.pooling.key, cell.layers[-1].key),
                             (cell.pooling.value, cell.layers[-1].value)):
            mine.load_state_dict(theirs.state_dict())
    model.readout.weight.copy_(torch.eye(model.readout.out_features, model.readout.in_features))
    model.readout.bias.zero_()


def _byte_student(teacher: Teacher, token_init: str, **config_kwargs):
    """A byte-level student with ByT5's byte tokenizer (id = byte + 3; pad, eos and unk are no-ops). Each
    printable ASCII byte starts at the teacher's vector for that character as a token (lower-cased, as
    the teacher normalises); other bytes keep the random initialisation. The token-mean readout is off
    by default: a mean of character vectors says little about a sentence."""
    tokenizer = ByT5Tokenizer()
    config_kwargs.setdefault("residual_token_mean", False)
    config = TF2RNNConfig(vocab_size=len(tokenizer), output_size=teacher.dim, teacher_hidden_size=teacher.dim,
                          skip_token_ids=sorted({tokenizer.pad_token_id, tokenizer.eos_token_id,
                                                 tokenizer.unk_token_id}),
                          pad_token_id=tokenizer.pad_token_id, teacher_name_or_path=teacher.hub_id, **config_kwargs)
    model = TF2RNNForDistillation(config)
    if token_init == "random":
        return model, tokenizer
    source = (teacher.token_vectors() if token_init == "teacher_outputs"
              else teacher.model.get_input_embeddings().weight.detach())
    table = model.get_input_embeddings().weight
    with torch.no_grad():
        for byte in range(32, 127):
            piece = teacher.tokenizer.convert_tokens_to_ids(chr(byte).lower())
            if piece != teacher.tokenizer.unk_token_id:
                (byte_id,) = tokenizer(chr(byte), add_special_tokens=False)["input_ids"]
                table[byte_id] = source[piece].to(table.dtype)
    return model, tokenizer
