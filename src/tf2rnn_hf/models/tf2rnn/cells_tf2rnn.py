"""Student cells: recurrent layers behind one interface.

Every cell maps inputs [batch, steps, embedding_size] to per-layer outputs [batch, steps, hidden_size] and
carries a tuple of batch-first tensors as its state. The all-zero state is the initial state, so a state
can be reset by zeroing it. `forward` takes rows whose real steps are left-aligned (`lengths` real steps
each, padding after them); the model compacts arbitrary masks into that form. After `forward`, the
returned state is the state after each row's last real step; outputs at padding positions are unused.
`step` advances every row by one real step. `forward` and repeated `step` agree.
"""

import math
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_tf2rnn import CELL_TYPES, TF2RNNConfig

State = Tuple[torch.Tensor, ...]


def _gather_steps(x: torch.Tensor, lengths: torch.Tensor, initial: torch.Tensor) -> torch.Tensor:
    """Pick x[b, lengths[b] - 1] per row ([B, T, ...] -> [B, ...]); rows of length 0 take `initial`."""
    index = (lengths - 1).clamp(min=0).view(-1, *([1] * (x.dim() - 1))).expand(-1, 1, *x.shape[2:])
    picked = x.gather(1, index).squeeze(1)
    keep = (lengths > 0).view(-1, *([1] * (picked.dim() - 1)))
    return torch.where(keep, picked, initial)


def _unpack(x: torch.Tensor, places: torch.Tensor, b: int, t: int) -> torch.Tensor:
    """Packed rows x [N, H] back to their flat `places` in a zero [B, T, H] (differentiable)."""
    return x.new_zeros(b * t, x.shape[-1]).index_copy(0, places, x).view(b, t, -1)


class TF2RNNCell(nn.Module):
    """The cell interface: `init_state`, `forward` over left-aligned rows, and `step`."""

    def __init__(self, config: TF2RNNConfig):
        super().__init__()
        self.config = config
        self.num_outputs = config.num_hidden_layers  # entries of `forward`'s output list; the last is read out

    def state_shapes(self) -> List[Tuple[int, ...]]:
        """Per-row shape of each state tensor (without the batch dimension)."""
        raise NotImplementedError

    def init_state(self, batch_size: int, device=None, dtype=None, read_only: bool = False) -> State:
        """The initial (all-zero) state for `batch_size` rows. With `read_only`, each tensor is one zero expanded
        to its shape: no memory, for a forward whose state is read and never written in place."""
        if read_only:
            zero = torch.zeros((), device=device, dtype=dtype)
            return tuple(zero.expand(batch_size, *shape) for shape in self.state_shapes())
        return tuple(torch.zeros(batch_size, *shape, device=device, dtype=dtype) for shape in self.state_shapes())

    def forward(self, inputs: torch.Tensor, state: State, lengths: torch.Tensor, use_cache: bool = True
                ) -> Tuple[List[torch.Tensor], Optional[State]]:
        """Every step of left-aligned rows (`lengths` real steps each): (per-output [B, T, H] list, new state).
        With `use_cache=False` the caller discards the new state, and a cell may return None for it."""
        raise NotImplementedError

    def _forward_stepwise(self, step_all, inputs: torch.Tensor, state: State, lengths: torch.Tensor
                          ) -> Tuple[List[torch.Tensor], State]:
        """`forward` one position at a time with `step_all` (inputs [B, E], state -> (per-output [B, H] list,
        state)); rows past their length keep their state. For cells whose steps cannot run in parallel."""
        per_step = []
        for j in range(inputs.shape[1]):
            outs, stepped = step_all(inputs[:, j], state)
            live = j < lengths
            state = tuple(torch.where(live.view(-1, *([1] * (new.dim() - 1))), new, old)
                          for new, old in zip(stepped, state))
            per_step.append(outs)
        return [torch.stack(outs, 1) for outs in zip(*per_step)], state

    def step(self, inputs: torch.Tensor, state: State) -> Tuple[torch.Tensor, State]:
        """One real step for every row: inputs [B, embedding_size] -> top-layer output [B, hidden_size]."""
        outputs, state = self.forward(inputs[:, None], state, torch.ones(inputs.shape[0], dtype=torch.long,
                                                                        device=inputs.device))
        return outputs[-1][:, 0], state


class GRUCell(TF2RNNCell):
    """Stacked GRU layers (the seed's student). Sequences run through `torch.nn.GRU` (fused kernels);
    one layer per module so per-layer outputs are available; a step is the same module on one step.
    With `config.residual_layers`, layers after the first are pre-norm residual blocks."""

    def __init__(self, config: TF2RNNConfig):
        super().__init__(config)
        sizes = [config.embedding_size] + [config.hidden_size] * config.num_hidden_layers
        self.layers = nn.ModuleList(self._make_layer(i, o) for i, o in zip(sizes[:-1], sizes[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                                   for _ in range(config.num_hidden_layers - 1)) if config.residual_layers else None

    def _block(self, i: int, x: torch.Tensor, run) -> Tuple[torch.Tensor, torch.Tensor]:
        """Layer i on x (its output and final hidden state); `run(layer, input)` runs the GRU itself."""
        if self.norms is None or i == 0:
            return run(self.layers[i], x)
        y, h_n = run(self.layers[i], self.norms[i - 1](x))
        return x + y, h_n

    def _make_layer(self, input_size: int, hidden_size: int) -> nn.Module:
        return nn.GRU(input_size, hidden_size, batch_first=True)

    def state_shapes(self):
        return [(self.config.num_hidden_layers, self.config.hidden_size)]

    def _run(self, layer, x, hidden, lengths, full):
        if full:
            return layer(x, hidden)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True,
                                                   enforce_sorted=False)
        out, hidden = layer(packed, hidden)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, hidden

    def forward(self, inputs, state, lengths, use_cache=True):
        (h,) = state
        full = bool((lengths == inputs.shape[1]).all())
        outputs, finals, x = [], [], inputs
        for i in range(len(self.layers)):
            x, h_n = self._block(i, x, lambda layer, v: self._run(layer, v, h[:, i].unsqueeze(0).contiguous(),
                                                                 lengths, full))
            outputs.append(x)
            finals.append(h_n[0])
        new_h = torch.stack(finals, dim=1)
        new_h = torch.where((lengths > 0).view(-1, 1, 1), new_h, h)
        return outputs, (new_h,)

    def step(self, inputs, state):
        (h,) = state
        if len(self.layers) == 1:  # the keystroke hot path: [B, 1, H] <-> [1, B, H] are free views here
            x, h_n = self.layers[0](inputs[:, None], h.transpose(0, 1))
            return x[:, 0], (h_n.transpose(0, 1),)
        x, finals = inputs[:, None], []
        for i in range(len(self.layers)):
            x, h_n = self._block(i, x, lambda layer, v: layer(v, h[:, i].unsqueeze(0).contiguous()))
            finals.append(h_n[0])
        return x[:, 0], (torch.stack(finals, dim=1),)


class LSTMCell(GRUCell):
    """Stacked LSTM layers; the state holds h and c per layer."""

    def _make_layer(self, input_size, hidden_size):
        return nn.LSTM(input_size, hidden_size, batch_first=True)

    def state_shapes(self):
        shape = (self.config.num_hidden_layers, self.config.hidden_size)
        return [shape, shape]

    def forward(self, inputs, state, lengths, use_cache=True):
        h, c = state
        full = bool((lengths == inputs.shape[1]).all())
        outputs, hs, cs, x = [], [], [], inputs
        for i, layer in enumerate(self.layers):
            hidden = (h[:, i].unsqueeze(0).contiguous(), c[:, i].unsqueeze(0).contiguous())
            x, (h_n, c_n) = self._run(layer, x, hidden, lengths, full)
            outputs.append(x)
            hs.append(h_n[0])
            cs.append(c_n[0])
        started = (lengths > 0).view(-1, 1, 1)
        return outputs, (torch.where(started, torch.stack(hs, 1), h), torch.where(started, torch.stack(cs, 1), c))

    def step(self, inputs, state):
        h, c = state
        x, hs, cs = inputs[:, None], [], []
        for i, layer in enumerate(self.layers):
            x, (h_n, c_n) = layer(x, (h[:, i].unsqueeze(0).contiguous(), c[:, i].unsqueeze(0).contiguous()))
            hs.append(h_n[0])
            cs.append(c_n[0])
        return x[:, 0], (torch.stack(hs, 1), torch.stack(cs, 1))


def _phi(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


class _FeedForward(nn.Module):
    def __init__(self, config: TF2RNNConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class _LinearAttentionMixer(nn.Module):
    """Causal linear attention (Katharopoulos et al. 2020) over `heads` heads of one layer.

    Kept from the paper: phi(x) = elu(x) + 1, the state S = sum phi(k) v^T and z = sum phi(k), the output
    phi(q) S / phi(q) z, the parallel causal form for training and the recurrent form for steps.
    Changed to stream forever: S and z are kept as running means (divided by the number of steps seen).
    The ratio phi(q)S / phi(q)z is unchanged by that scaling, but the state no longer grows with the
    text, so 100,000 steps stay finite even in half precision.
    """

    def __init__(self, config: TF2RNNConfig, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, config.hidden_size // config.num_attention_heads
        width = heads * self.head_dim
        self.qkv = nn.Linear(config.hidden_size, 3 * width)
        self.eps = 1e-6

    def state_shapes(self):
        return [(self.heads, self.head_dim, self.head_dim), (self.heads, self.head_dim), (1,)]

    def _split(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.head_dim).unbind(2)
        return _phi(q).transpose(1, 2), _phi(k).transpose(1, 2), v.transpose(1, 2)  # [B, H, T, d]

    def forward(self, x, state, lengths):
        s_mean, z_mean, count = state
        q, k, v = self._split(x)
        t = x.shape[1]
        valid = (torch.arange(t, device=x.device)[None] < lengths[:, None]).to(x.dtype)  # [B, T]
        k = k * valid[:, None, :, None]
        v = v * valid[:, None, :, None]
        s0 = s_mean * count[:, :, None, None]
        z0 = z_mean * count[:, :, None]
        scores = (q @ k.transpose(-1, -2)).tril()  # [B, H, T, T], causal
        num = scores @ v + q @ s0
        den = scores.sum(-1) + (q * z0[:, :, None]).sum(-1)
        n_t = count + torch.cumsum(valid, dim=1)  # steps seen after each position
        scale = n_t.clamp(min=1.0)[:, None, :]
        out = (num / scale[..., None]) / (den / scale + self.eps)[..., None]
        out = out.transpose(1, 2).reshape(x.shape[0], t, -1)
        n_final = count + valid.sum(1, keepdim=True)
        denom = n_final.clamp(min=1.0)
        s_new = (s0 + k.transpose(-1, -2) @ v) / denom[:, :, None, None]
        z_new = (z0 + k.sum(2)) / denom[:, :, None]
        return out, (s_new, z_new, n_final)

    def step(self, x, state):
        s_mean, z_mean, count = state
        q, k, v = (y[:, :, 0] for y in self._split(x[:, None]))  # [B, H, d]
        n = count + 1.0
        s_new = s_mean + (k[..., :, None] * v[..., None, :] - s_mean) / n[:, :, None, None]
        z_new = z_mean + (k - z_mean) / n[:, :, None]
        num = (q[..., None, :] @ s_new).squeeze(-2)
        den = (q * z_new).sum(-1, keepdim=True)
        return (num / (den + self.eps)).reshape(x.shape[0], -1), (s_new, z_new, n)


class _AttentionLayer(nn.Module):
    """Pre-norm block: mixer + residual, then feed-forward + residual."""

    def __init__(self, config: TF2RNNConfig, mixer: nn.Module):
        super().__init__()
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mixer = mixer
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.ffn = _FeedForward(config)

    def forward(self, x, state, lengths):
        y, state = self.mixer(self.norm(x), state, lengths)
        return self.ffn(x + self.out(y)), state

    def step(self, x, state):
        y, state = self.mixer.step(self.norm(x), state)
        return self.ffn(x + self.out(y)), state


class _StackedCell(TF2RNNCell):
    """Input projection, then `num_hidden_layers` blocks whose states are concatenated in one tuple."""

    def __init__(self, config: TF2RNNConfig):
        super().__init__(config)
        self.proj = nn.Linear(config.embedding_size, config.hidden_size)
        self.layers = nn.ModuleList(_AttentionLayer(config, self._make_mixer(config))
                                    for _ in range(config.num_hidden_layers))
        self._per_layer = len(self.layers[0].mixer.state_shapes())

    def _make_mixer(self, config):
        raise NotImplementedError

    def state_shapes(self):
        return [s for layer in self.layers for s in layer.mixer.state_shapes()]

    def _layer_state(self, state, i):
        return state[i * self._per_layer:(i + 1) * self._per_layer]

    chunk_size = 128  # the parallel form costs O(T^2); longer inputs run chunk by chunk, carrying the state

    def forward(self, inputs, state, lengths, use_cache=True):
        if inputs.shape[1] > self.chunk_size:
            pieces = []
            for start in range(0, inputs.shape[1], self.chunk_size):
                chunk = inputs[:, start:start + self.chunk_size]
                outs, state = self.forward(chunk, state, (lengths - start).clamp(0, chunk.shape[1]))
                pieces.append(outs)
            return [torch.cat(layer_outs, 1) for layer_outs in zip(*pieces)], state
        x, outputs, new_state = self.proj(inputs), [], []
        for i, layer in enumerate(self.layers):
            x, s = layer(x, self._layer_state(state, i), lengths)
            outputs.append(x)
            new_state.extend(s)
        return outputs, tuple(new_state)

    def step(self, inputs, state):
        x, new_state = self.proj(inputs), []
        for i, layer in enumerate(self.layers):
            x, s = layer.step(x, self._layer_state(state, i))
            new_state.extend(s)
        return x, tuple(new_state)


class LinearAttentionCell(_StackedCell):
    """`linear_attention`: "Transformers are RNNs" layers (see `_LinearAttentionMixer`)."""

    def _make_mixer(self, config):
        return _LinearAttentionMixer(config, config.num_attention_heads)


class _REMMixer(nn.Module):
    """Recurrence-encoding heads (Huang et al., "Encoding Recurrence into Transformers") mixed with
    linear attention.

    Kept from the paper: REM heads whose weights over past positions are lambda^(t-i) (real decay,
    lambda = tanh(eta)) or gamma^(t-i) cos((t-i) theta) (cyclic, gamma = sigmoid(nu)), mixed with an
    attention head by a learned gate sigmoid(mu) per head, as RSA mixes REM and self-attention.
    Changed to stream: the REM matrix applied to the values is run as its equivalent recurrence
    s_t = lambda s_{t-1} + (1 - |lambda|) v_t (a complex rotation for cyclic heads), and the attention
    part is causal linear attention, so the whole state is O(1) in the text length. The (1 - |lambda|)
    input scale keeps s bounded by max |v|. Decays start spread over time scales of 2..256 steps.
    """

    def __init__(self, config: TF2RNNConfig):
        super().__init__()
        self.heads, self.head_dim = config.num_attention_heads, config.hidden_size // config.num_attention_heads
        self.n_real, self.n_cyc = config.rem_real_heads, config.rem_cyclic_heads
        self.attention = _LinearAttentionMixer(config, self.heads)
        for name, value in self._initial_values().items():
            setattr(self, name, nn.Parameter(value))

    def _initial_values(self) -> dict:
        d = self.head_dim
        scales = torch.logspace(math.log10(2.0), math.log10(256.0), max(1, (self.n_real + self.n_cyc) * d))
        decays = 1.0 - 1.0 / scales  # target |lambda|, gamma spread over time scales
        real = decays[: self.n_real * d].view(self.n_real, d)
        cyc = decays[self.n_real * d: (self.n_real + self.n_cyc) * d].view(self.n_cyc, d)
        periods = torch.logspace(math.log10(4.0), math.log10(64.0), max(1, self.n_cyc * d))[: self.n_cyc * d]
        return {"eta": torch.atanh(real.clamp(max=0.999)), "nu": torch.logit(cyc.clamp(max=0.999)),
                "theta": (2 * math.pi / periods).view(self.n_cyc, d),
                "mu": torch.zeros(self.n_real + self.n_cyc)}  # the gate starts at 0.5

    def init_parameters(self, copy_) -> None:
        """Set the decays, angles and gates to their initial values with `copy_` (which skips loaded ones)."""
        for name, value in self._initial_values().items():
            copy_(getattr(self, name), value)

    def state_shapes(self):
        d = self.head_dim
        return self.attention.state_shapes() + [(self.n_real, d), (self.n_cyc, d), (self.n_cyc, d)]

    def _values(self, x):
        """The value vectors of the REM heads ([B, T, heads_rem, d]), shared with the attention part."""
        b, t, _ = x.shape
        v = self.attention.qkv(x).view(b, t, 3, self.heads, self.head_dim)[:, :, 2]
        return v[:, :, : self.n_real], v[:, :, self.n_real: self.n_real + self.n_cyc]

    def _mix(self, attn, rem_real, rem_cyc):
        """attn [..., heads, d]; rem_* [..., n, d] -> gated mixture per REM head."""
        rem = torch.cat([rem_real, rem_cyc], dim=-2)
        gate = torch.sigmoid(self.mu)[:, None]
        n = rem.shape[-2]
        mixed = (1 - gate) * attn[..., :n, :] + gate * rem
        return torch.cat([mixed, attn[..., n:, :]], dim=-2)

    def forward(self, x, state, lengths):
        b, t, _ = x.shape
        att_state, (r0, c0_re, c0_im) = state[:3], state[3:]
        attn, att_new = self.attention(x, att_state, lengths)
        v_real, v_cyc = self._values(x)
        pos = torch.arange(t, device=x.device, dtype=x.dtype)
        lag = (pos[:, None] - pos[None, :])  # [T, T] t - i
        causal = lag >= 0
        lag = lag.clamp(min=0)
        lam = torch.tanh(self.eta)  # [n_real, d]
        # real heads: s_t = lam^(t+1) s_0 + sum_{i<=t} lam^(t-i) (1-|lam|) v_i
        w_real = torch.where(causal, torch.pow(lam[..., None, None], lag), torch.zeros((), dtype=x.dtype))
        real = torch.einsum("hdti,bihd->bthd", w_real, v_real * (1 - lam.abs()))
        real = real + torch.pow(lam, pos[:, None, None] + 1) * r0[:, None]
        gamma, theta = torch.sigmoid(self.nu), self.theta
        decay = torch.where(causal, torch.pow(gamma[..., None, None], lag), torch.zeros((), dtype=x.dtype))
        angle = lag * theta[..., None, None]
        vin = v_cyc * (1 - gamma)
        cyc_re = torch.einsum("hdti,bihd->bthd", decay * torch.cos(angle), vin)
        cyc_im = torch.einsum("hdti,bihd->bthd", decay * torch.sin(angle), vin)
        steps = pos[:, None, None] + 1
        g_t, a_t = torch.pow(gamma, steps), steps * theta
        cyc_re = cyc_re + g_t * (torch.cos(a_t) * c0_re[:, None] - torch.sin(a_t) * c0_im[:, None])
        cyc_im = cyc_im + g_t * (torch.sin(a_t) * c0_re[:, None] + torch.cos(a_t) * c0_im[:, None])
        out = self._mix(attn.view(b, t, self.heads, self.head_dim), real, cyc_re).reshape(b, t, -1)
        new = (_gather_steps(real, lengths, r0), _gather_steps(cyc_re, lengths, c0_re),
               _gather_steps(cyc_im, lengths, c0_im))
        return out, tuple(att_new) + new

    def step(self, x, state):
        att_state, (r0, c_re, c_im) = state[:3], state[3:]
        attn, att_new = self.attention.step(x, att_state)
        v_real, v_cyc = (v[:, 0] for v in self._values(x[:, None]))
        lam = torch.tanh(self.eta)
        real = lam * r0 + (1 - lam.abs()) * v_real
        gamma = torch.sigmoid(self.nu)
        cos, sin = torch.cos(self.theta), torch.sin(self.theta)
        re = gamma * (cos * c_re - sin * c_im) + (1 - gamma) * v_cyc
        im = gamma * (sin * c_re + cos * c_im)
        out = self._mix(attn.view(x.shape[0], self.heads, self.head_dim), real, re).reshape(x.shape[0], -1)
        return out, tuple(att_new) + (real, re, im)


class REMCell(_StackedCell):
    """`rem`: layers of REM heads gated with linear-attention heads (see `_REMMixer`)."""

    def _make_mixer(self, config):
        return _REMMixer(config)


class _MultiStateLayer(nn.Module):
    """A bounded multi-state RNN layer (Oren et al. 2024, "Transformers are Multi-State RNNs").

    Kept from the paper: the state is a set of at most K slot vectors (the MSRNN view of a KV cache),
    read by attention from the current query, and when the set is full the slot with the lowest
    attention weight at this step is evicted (TOVA). The update is the causal form of StarSaber's
    fixed-point step: h_t = tanh(V x_t + sum_i G_ti U h_i), G_t = softmax_i((W_q h_{t-1}) . (W_k h_i) / sqrt(H)).
    Changed: the new h_t always enters the set; eviction chooses among the K older slots only. With
    K >= the text length nothing is evicted: the unbounded multi-state RNN.
    """

    def __init__(self, config: TF2RNNConfig, input_size: int):
        super().__init__()
        h = config.hidden_size
        self.k = config.num_slots
        self.V = nn.Linear(input_size, h)
        self.U = nn.Linear(h, h, bias=False)
        self.q = nn.Linear(h, h, bias=False)
        self.key = nn.Linear(h, h, bias=False)
        self.scale = 1.0 / math.sqrt(h)

    def state_shapes(self, hidden_size: int):
        return [(self.k, hidden_size), (self.k,), (hidden_size,)]

    def attention_weights(self, prev: torch.Tensor, slots: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Softmax over the valid slots of the query from `prev`; rows with no slot get all zeros."""
        scores = torch.einsum("bh,bkh->bk", self.q(prev), self.key(slots)) * self.scale
        scores = scores.masked_fill(valid <= 0, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.nan_to_num(weights, nan=0.0)

    def step(self, x, state):
        slots, valid, prev = state
        g = self.attention_weights(prev, slots, valid)
        h = torch.tanh(self.V(x) + torch.einsum("bk,bkh->bh", g, self.U(slots)))
        count = valid.sum(-1)
        full = count >= self.k
        # TOVA: when full, replace the slot with the lowest weight at this step; else fill the next one.
        evict = g.masked_fill(valid <= 0, float("inf")).argmin(-1)
        target = torch.where(full, evict, count.long().clamp(max=self.k - 1))
        onehot = F.one_hot(target, self.k).to(x.dtype)
        slots = slots * (1 - onehot[..., None]) + onehot[..., None] * h[:, None]
        valid = torch.maximum(valid, onehot)
        return h, (slots, valid, h)


class MultiStateCell(TF2RNNCell):
    """`multistate`: stacked bounded multi-state layers (see `_MultiStateLayer`), run step by step."""

    def __init__(self, config: TF2RNNConfig):
        super().__init__(config)
        sizes = [config.embedding_size] + [config.hidden_size] * config.num_hidden_layers
        self.layers = nn.ModuleList(_MultiStateLayer(config, i) for i in sizes[:-1])

    def state_shapes(self):
        return [s for layer in self.layers for s in layer.state_shapes(self.config.hidden_size)]

    def _step_all(self, x, state):
        """Every layer one step: (each layer's output, state)."""
        outputs, new_state = [], []
        for i, layer in enumerate(self.layers):
            x, s = layer.step(x, state[3 * i: 3 * i + 3])
            outputs.append(x)
            new_state.extend(s)
        return outputs, tuple(new_state)

    def forward(self, inputs, state, lengths, use_cache=True):
        if inputs.shape[1] == 0:
            return [inputs.new_zeros(inputs.shape[0], 0, self.config.hidden_size) for _ in self.layers], state
        return self._forward_stepwise(self._step_all, inputs, state, lengths)

    def step(self, inputs, state):
        outputs, state = self._step_all(inputs, state)
        return outputs[-1], state


class _PostNormLayer(nn.Module):
    """One BERT-shaped layer (post-norm, GELU feed-forward) whose self-attention reads a bounded cache.

    The attention sees a learned sink key/value (the teacher's [CLS] at this layer: in a causal model the
    first token's state never changes, so it is a constant), the cached keys/values of earlier steps, and
    the current step itself. The parameter names follow `BertLayer`'s roles so the teacher's weights copy over.
    """

    def __init__(self, config: TF2RNNConfig):
        super().__init__()
        h = config.hidden_size
        self.heads, self.head_dim = config.num_attention_heads, h // config.num_attention_heads
        self.query, self.key, self.value, self.out = (nn.Linear(h, h) for _ in range(4))
        self.attention_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.up = nn.Linear(h, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, h)
        self.output_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.sink_key = nn.Parameter(torch.zeros(h))
        self.sink_value = nn.Parameter(torch.zeros(h))
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:-1], self.heads, self.head_dim)

    def project(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x's query, key and value projections."""
        return self.query(x), self.key(x), self.value(x)

    @torch.no_grad()  # choices, not values: no gradient flows through them, so training keeps no graph of the loop
    def evictions(self, q: torch.Tensor, keys: torch.Tensor, k: torch.Tensor, fill: torch.Tensor,
                  lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """TOVA over a block of steps, from its queries and keys (q, k [B, T, H]) and the cache as it starts (`keys`
        [B, S, H], `fill` [B, S]): which of [cache rows, the block's steps] each step attends to (`allowed`
        [B, T, S + T], itself included), and after each row's last real step (`lengths`) which of them each slot
        holds ([B, S] indices) and whether it is filled ([B, S]). Each step takes the next free slot, or the one its
        query weighs least (heads averaged), as `TOVAAttentionCell._step_all` does; only that choice goes step by
        step (a dozen small ops), on scores made in one product."""
        b, t, _ = q.shape
        slots = keys.shape[1]
        width = 1 + slots + t  # the sink, the cache's rows, the block's steps
        all_k = self._heads(torch.cat([self.sink_key.to(k.dtype).expand(b, 1, -1), keys, k], 1))
        cols = torch.arange(width, device=q.device)
        inf = float("-inf")
        causal = torch.where(cols[None] <= 1 + slots + torch.arange(t, device=q.device)[:, None], 0.0, inf)
        scores = torch.einsum("bthd,bnhd->bhtn", self._heads(q), all_k) * self.scale + causal
        # 0 for the keys a step may attend to (the sink, the rows in the cache, the steps not evicted), else -inf;
        # [B, 1, ...] throughout, so that no step makes a view.
        gone = torch.cat([scores.new_zeros(b, 1), torch.where(fill > 0, 0.0, inf), scores.new_zeros(b, t)], 1)[:, None]
        held = torch.arange(1, slots + 1, device=q.device).expand(b, 1, -1)  # the key each slot holds
        gones, helds = [], []
        for j, row in enumerate(scores.unbind(2)):
            gones.append(gone)
            helds.append(held)
            weight = torch.softmax(row + gone, -1).mean(1, keepdim=True)
            # An empty slot reads -inf: the first one is taken while any is left (they fill in order).
            target = (weight + gone).gather(2, held).argmin(-1, keepdim=True)
            gone = gone.scatter(2, held.gather(2, target), inf)
            held = held.scatter(2, target, 1 + slots + j)
        gones.append(gone)
        helds.append(held)
        allowed = (torch.cat(gones[:-1], 1) + causal == 0)[..., 1:]
        rows, last = torch.arange(b, device=q.device), lengths.clamp(0, t)
        held, gone = torch.cat(helds, 1)[rows, last], torch.cat(gones, 1)[rows, last]
        return allowed, held - 1, gone.gather(1, held) == 0

    def attend(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, allowed: torch.Tensor,
               need_weights: bool = True, places: Optional[torch.Tensor] = None
               ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """x [B, T, H] attends over [sink, `keys`/`values` [B, S, H], its own T steps] where `allowed`
        [B, T, S + T] says so (the sink always). Returns (layer output, this chunk's keys and values [B, T, H],
        attention weights [B, heads, T, 1 + S + T], or None with `need_weights=False`). With `places` [N] (flat
        indices into [B, T]), x is [N, H], those positions only: the products skip the padding, which the
        attention alone sees (as zero keys it may not read), and the output is [N, H] too."""
        b, t = allowed.shape[:2]
        q, k, v = self.project(x)
        if places is not None:
            q, k, v = (_unpack(y, places, b, t) for y in (q, k, v))
        mixed, weights = self.mix(q, k, v, keys, values, allowed, need_weights)
        if places is not None:
            mixed = mixed.reshape(b * t, -1).index_select(0, places)
        return self.finish(x, mixed), k, v, weights

    def mix(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
            allowed: torch.Tensor, need_weights: bool = True) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The attention of `attend` from the chunk's projections (q, k, v [B, T, H]): (mixed values [B, T, H],
        weights or None)."""
        b, t = allowed.shape[:2]
        q = self._heads(q)
        all_k = self._heads(torch.cat([self.sink_key.expand(b, 1, -1), keys, k], 1))
        all_v = self._heads(torch.cat([self.sink_value.expand(b, 1, -1), values, v], 1))
        allowed = torch.cat([allowed.new_ones(*allowed.shape[:2], 1), allowed], -1)
        if need_weights:  # a step reads them (TOVA evicts by them)
            scores = torch.einsum("bthd,bshd->bhts", q, all_k) * self.scale
            weights = torch.softmax(scores.masked_fill(~allowed[:, None], float("-inf")), dim=-1)
            return torch.einsum("bhts,bshd->bthd", weights, all_v).reshape(b, t, -1), weights
        # The parallel forms read none: PyTorch's fused attention keeps no [B, heads, T, S] weights around.
        q, all_k, all_v = (y.transpose(1, 2) for y in (q, all_k, all_v))
        if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # On CPU its bf16 backward ran ~10x slower than fp32 (benchmarks/probes/train_step.py --bf16),
            # undoing what bf16 saves in the products around it: attend in fp32.
            with torch.autocast("cpu", enabled=False):
                mixed = F.scaled_dot_product_attention(q.float(), all_k.float(), all_v.float(),
                                                       attn_mask=allowed[:, None], scale=self.scale)
        else:
            mixed = F.scaled_dot_product_attention(q, all_k, all_v, attn_mask=allowed[:, None], scale=self.scale)
        return mixed.transpose(1, 2).reshape(b, t, -1), None

    def finish(self, x: torch.Tensor, mixed: torch.Tensor) -> torch.Tensor:
        """The layer's output from its input `x` and its attention's `mixed` values: output map, norms, feed-forward."""
        x = self.attention_norm(x + self.out(mixed))
        return self.output_norm(x + self.down(F.gelu(self.up(x))))

    def init_parameters(self, copy_) -> None:
        """Small random sinks (a teacher-built student overwrites them with the teacher's [CLS])."""
        std = 0.02
        copy_(self.sink_key, torch.randn(self.sink_key.shape) * std)
        copy_(self.sink_value, torch.randn(self.sink_value.shape) * std)


class _BidirectionalPooling(nn.Module):
    """An O(1) correction for what a causal student cannot see: how earlier tokens would read later ones.

    The teacher mean-pools tokens that attend both ways. The mean over i of an unnormalised linear attention
    of every token to every token, sum_i sum_j phi(q_i).phi(k_j) v_j, factors into running sums,
    (sum_i phi(q_i)) . (sum_j phi(k_j) v_j^T), so the pooled output of a bidirectional linear-attention layer
    over the whole prefix is exact at constant cost per step. Normalised by (sum_i phi(q_i)) . (sum_j
    phi(k_j)) it is a convex mix of the values. It reads the top layer's outputs and adds `out(mix)` to the
    pooled mean; `out` starts at zero (its own parameters, as transformers' initialisation would overwrite an
    `nn.Linear`'s), so a freshly inherited student is unchanged. State per row: the query sum [H], the
    key-value sums [heads, d, d] and the key sum [H], flattened.
    """

    def __init__(self, config: TF2RNNConfig):
        super().__init__()
        h = config.hidden_size
        self.heads, self.head_dim = config.num_attention_heads, h // config.num_attention_heads
        self.query, self.key, self.value = (nn.Linear(h, h) for _ in range(3))
        self.out_weight = nn.Parameter(torch.zeros(h, h))
        self.out_bias = nn.Parameter(torch.zeros(h))

    def init_parameters(self, copy_) -> None:
        copy_(self.out_weight, torch.zeros_like(self.out_weight))
        copy_(self.out_bias, torch.zeros_like(self.out_bias))

    def state_shapes(self):
        h, d = self.heads * self.head_dim, self.head_dim
        return [(h,), (self.heads * d * d,), (h,)]

    def forward(self, x: torch.Tensor, valid: torch.Tensor, state: State) -> Tuple[torch.Tensor, State]:
        """x [B, T, H] (the top layer's outputs), `valid` [B, T] -> (correction after each step [B, T, H],
        the state after the chunk)."""
        b, t, _ = x.shape
        heads, d = self.heads, self.head_dim
        mask = valid[..., None, None].to(x.dtype)
        fq = _phi(self.query(x).view(b, t, heads, d)) * mask
        fk = _phi(self.key(x).view(b, t, heads, d)) * mask
        v = self.value(x).view(b, t, heads, d)
        q_sum0, kv0, k_sum0 = state[0].view(b, heads, d), state[1].view(b, heads, d, d), state[2].view(b, heads, d)
        queries = q_sum0[:, None] + torch.cumsum(fq, 1)  # sum of phi(q_i) for i <= t: [B, T, heads, d]
        steps = torch.arange(t, device=x.device)
        scores = torch.einsum("bthd,bshd->bhts", queries, fk).masked_fill(steps[None, :] > steps[:, None], 0.0)
        numerator = torch.einsum("bthd,bhde->bthe", queries, kv0) + torch.einsum("bhts,bshe->bthe", scores, v)
        denominator = torch.einsum("bthd,bhd->bth", queries, k_sum0) + scores.sum(-1).transpose(1, 2)
        # An empty prefix has 0 / 0: the clamp makes its correction 0 (phi > 0, so real sums are positive).
        mix = numerator / denominator.clamp(min=1e-6)[..., None]
        new_state = ((q_sum0 + fq.sum(1)).reshape(b, -1),
                     (kv0 + torch.einsum("bshd,bshe->bhde", fk, v)).reshape(b, -1),
                     (k_sum0 + fk.sum(1)).reshape(b, -1))
        return F.linear(mix.reshape(b, t, -1), self.out_weight, self.out_bias), new_state


class _WordTailAdapter(nn.Module):
    """`tail_layers`' map from a layer's outputs to the top layer's (TF2RNNConfig.tail_layers): x W^T + b, starting at
    the identity. Plain parameters, set in `init_parameters`, as transformers' initialisation would overwrite an
    `nn.Linear`'s."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.weight = nn.Parameter(torch.eye(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))

    def init_parameters(self, copy_) -> None:
        copy_(self.weight, torch.eye(self.weight.shape[0]))
        copy_(self.bias, torch.zeros_like(self.bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class TOVAAttentionCell(TF2RNNCell):
    """`tova_attention`: the teacher's own layers made causal, over a bounded cache (a multi-state RNN).

    Oren et al. 2024 ("Transformers are Multi-State RNNs") read a causal transformer as an RNN whose state
    is its key/value cache, and bound it with TOVA: when a layer's cache holds `num_slots` entries, the one
    with the lowest attention weight from the current query (averaged over heads) is evicted. Kept: that
    policy, per layer, with the current step always kept. Added for a bidirectional encoder's student: the
    first token ([CLS]) is a learned sink outside the cache (StreamingLLM's attention sink); the position of
    step n is n (the sink is 0), held at `max_position_embeddings - 1` past the table; and the output is the
    running mean of the top layer's outputs including the sink's, as the teacher mean-pools its tokens. With
    `config.bidirectional_pooling` a `_BidirectionalPooling` correction is added to that mean; with
    `config.pooling_position_exponent` the mean weighs step n by (n + 1) ** p, p learned (SGPT's
    position-weighted mean pooling for causal models), keeping the total weight as one more state entry.

    Training runs the parallel form (every step of a chunk at once, causal mask); it equals the recurrence
    exactly while no row overflows its cache. Past that `forward` runs the evicting form: layer by layer, every
    step's products and attention at once (the attention over blocks of steps), and only TOVA's choice of slot step
    by step, on the attention weights. Both equal `step` repeated (to float rounding).

    With `config.open_tokens` W > 1 the newest tokens stay open (LoLCATs keeps a window of exact attention for
    what a linearised one misses; here the window is what a causal one misses): they attend to each other both
    ways and to the cache, are recomputed at every step, and enter the cache as a block of W. The output pools the
    committed tokens' top-layer outputs and the open ones' current outputs. Its parallel form is one pass under a
    block-causal mask (what every full block and each row's last block become) plus, for steps in the middle of a
    block, that block's first tokens again, attending to the earlier blocks (`needed` limits those to the steps a
    caller reads). State: the open tokens' inputs [W - 1, H] and their count, after the layers'.

    With `config.tail_open_tokens` W > 1 (a `tail_layers` student) the block is open in the upper layers only:
    the same parallel form with the lower layers causal, whose outputs feed the recomputed block middles (`forward`
    from the empty state; its state is a stream's after the text ends a word), and a word's end in `step_upper`
    (`_step_upper_open`). `step` runs each token as a word of its own, and `forward` steps so from a non-empty state
    or past `num_slots` (evictions, which the parallel form does not hold). A text's embedding after its last word
    does not depend on where its words end: blocks of W commit as they fill, whichever word fills them.
    """

    def __init__(self, config: TF2RNNConfig):
        super().__init__(config)
        h = config.hidden_size
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, h)
        self.embedding_bias = nn.Parameter(torch.zeros(h))  # BERT's token-type-0 vector
        self.embedding_norm = nn.LayerNorm(h, eps=config.layer_norm_eps)
        self.layers = nn.ModuleList(_PostNormLayer(config) for _ in range(config.num_hidden_layers))
        self.sink_output = nn.Parameter(torch.zeros(h))  # the sink's top-layer output, for the mean
        self.pooling = _BidirectionalPooling(config) if config.bidirectional_pooling else None
        self.tail_adapter = _WordTailAdapter(h) if config.tail_layers is not None else None
        p = config.pooling_position_exponent
        self.pooling_exponent = nn.Parameter(torch.tensor(float(p))) if p is not None else None
        self._tail = 2 if p is None else 3  # state entries after the layers' and the correction's: [total,] count, mean
        self.slots = config.num_slots
        self.open = config.open_tokens
        self.tail_open = getattr(config, "tail_open_tokens", 1)
        self.num_outputs = config.num_hidden_layers + 1

    def init_parameters(self, copy_) -> None:
        copy_(self.embedding_bias, torch.zeros_like(self.embedding_bias))
        copy_(self.sink_output, torch.zeros_like(self.sink_output))
        if self.pooling_exponent is not None:
            copy_(self.pooling_exponent, torch.tensor(float(self.config.pooling_position_exponent)))

    @staticmethod
    def rewritten_entries(num_layers: int, num_entries: int) -> List[int]:
        """Indices of the state entries a step rewrites whole, in order: each layer's fill, then everything after
        the layers (pooling, [total,] count, mean). The rest, each layer's keys and values, change by one row."""
        return [i for i in range(num_entries) if i >= 3 * num_layers or i % 3 == 2]

    def state_shapes(self):
        h, k = self.config.hidden_size, self.slots
        pooling = self.pooling.state_shapes() if self.pooling is not None else []
        total = [(1,)] if self.pooling_exponent is not None else []
        held = [(self.open - 1, h), (1,)] if self.open > 1 else []
        if self.tail_open > 1:  # the upper layers' open block (`_step_upper_open`)
            held = [(self.tail_open - 1, h), (1,), (h,)]
        return [(k, h), (k, h), (k,)] * len(self.layers) + held + pooling + total + [(1,), (h,)]

    def _pooled_output(self, x: torch.Tensor, valid: torch.Tensor, means: torch.Tensor, state: State
                       ) -> Tuple[torch.Tensor, list]:
        """The cell's output after each step (the running means [B, T, H], plus the bidirectional pooling's
        correction where configured) and that term's new state (empty without it)."""
        if self.pooling is None:
            return means, []
        correction, pooling_state = self.pooling(x, valid, tuple(state[3 * len(self.layers): -self._tail]))
        return means + correction, list(pooling_state)

    def _embed(self, inputs: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        positions = positions.clamp(max=self.config.max_position_embeddings - 1).long()
        return self.embedding_norm(inputs + self.position_embeddings(positions) + self.embedding_bias)

    def _pool_weights(self, steps: torch.Tensor) -> torch.Tensor:
        """Each step's weight in the pooled mean (step n >= 1; the sink, step 0, weighs 1): 1, or (n + 1) ** p."""
        if self.pooling_exponent is None:
            return torch.ones_like(steps)
        return (steps + 1).pow(self.pooling_exponent.to(steps.dtype))

    def _pooled_total(self, count: torch.Tensor, state: State) -> torch.Tensor:
        """The weight pooled so far ([B, 1]): count + 1 for the plain mean; the zero state holds the sink's 1."""
        if self.pooling_exponent is None:
            return count + 1
        return torch.where(count > 0, state[-3], torch.ones_like(count))

    def _pooled_sum(self, count: torch.Tensor, pooled: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
        """Weighted sum of the sink's and the top layer's outputs so far ([B, H]); the zero state has seen none."""
        return torch.where(count > 0, pooled * total, self.sink_output.to(pooled.dtype).expand_as(pooled))

    def tail_pooled(self, top: torch.Tensor, typed: torch.Tensor, valid: torch.Tensor, starts: torch.Tensor,
                    pooled: Optional[torch.Tensor] = None) -> torch.Tensor:
        """[B, T, H]: the pooled output after each step of a chunk read from the empty state (`valid` [B, T]) when
        the tokens of each step's current word, from `starts` [B, T] (the index of the word's first token) to the
        step, pool `typed` [B, T, H] in place of their top-layer outputs `top` (TF2RNNConfig.tail_layers: the
        layer-`tail_layers` outputs through `tail_adapter`). Earlier words pool as in `_pool`; with typed = top,
        this is `_pool`'s output. With `tail_open_tokens` an earlier word's top-layer output depends on where the
        upper layers last ran, so they are read from `pooled` [B, T, H], the cell's output at the step before the
        word (which `needed` must cover)."""
        b, t, h = top.shape
        steps = torch.arange(t, device=top.device)
        weights = (self._pool_weights((1 + steps[None]).to(top.dtype)) * valid.to(top.dtype))[..., None]  # _pool's
        zero = top.new_zeros(b, 1, h)
        done = torch.cat([zero, torch.cumsum(top * weights, 1)], 1)  # done[:, s]: the weighted sum before step s
        tail = torch.cat([zero, torch.cumsum(typed * weights, 1)], 1)
        first = starts[..., None].expand(-1, -1, h)
        totals = 1 + torch.cumsum(weights, 1)
        if pooled is None:
            carried = self.sink_output + done.gather(1, first)
        else:  # the sink and every earlier word, as the upper layers left them at the previous word's end
            before = (pooled * totals).gather(1, (first - 1).clamp(min=0))
            carried = torch.where(first > 0, before, self.sink_output.to(top.dtype).expand_as(before))
        return (carried + tail[:, 1:] - tail.gather(1, first)) / totals

    def forward(self, inputs, state, lengths, use_cache=True, needed: Optional[torch.Tensor] = None):
        """See `TF2RNNCell.forward`; `needed` [B, T] (open tokens only): the steps whose outputs the caller reads,
        so that the parallel form recomputes no other block middles (the outputs of the rest are unspecified)."""
        b, t, _ = inputs.shape
        count = state[-2]
        if t == 0:
            return [inputs.new_zeros(b, 0, self.config.hidden_size)] * self.num_outputs, state
        if self.tail_open > 1:
            if bool(count.any()) or int(lengths.max()) > self.slots:  # the parallel form holds no evictions
                return self._forward_stepwise(self._step_all, inputs, state, lengths)
            return self._forward_open(inputs, state, lengths, use_cache, needed)
        if self.open > 1:
            opened = state[3 * len(self.layers) + 1]  # open tokens before this chunk
            if bool(count.any()) or bool(opened.any()) or int(lengths.max()) > self.slots:
                return self._forward_stepwise(self._step_all, inputs, state, lengths)
            return self._forward_open(inputs, state, lengths, use_cache, needed)
        room = self.slots - int(count.max())  # steps every row can take before any cache is full
        if bool((count[:, 0] + lengths > self.slots).any()):
            if room <= 0:
                return self._forward_evicting(inputs, state, lengths, use_cache)
            # The parallel form up to the first possible eviction, then the evicting form.
            head, state = self.forward(inputs[:, :room], state, lengths.clamp(max=room))
            tail, state = self._forward_evicting(inputs[:, room:], state, (lengths - room).clamp(min=0), use_cache)
            return [torch.cat(pair, 1) for pair in zip(head, tail)], state
        steps = torch.arange(t, device=inputs.device)
        valid = steps[None] < lengths[:, None]  # [B, T]
        x = self._embed(inputs, count + 1 + steps[None])
        causal = (steps[:, None] >= steps[None])[None] & valid[:, None]
        # From an empty cache (every training batch) the chunk attends to itself alone and fills slots 0..T-1:
        # attending over the empty slots and placing rows by a one-hot product cost a fifth of a training step.
        empty = not bool(count.any())
        if empty:
            allowed = causal
            cut = min(t, self.slots)  # steps past the slots are padding here: no row overflows its cache
            new_fill = F.pad(valid[:, :cut].to(inputs.dtype), (0, self.slots - cut))
        else:
            filled = state[2].bool()  # no eviction has happened yet, so every layer holds `count` slots in order
            allowed = torch.cat([filled[:, None].expand(-1, t, -1), causal], -1)
            # Step j of a row goes to slot count + j.
            slot_ids = torch.arange(self.slots, device=inputs.device)
            place = ((count.long() + steps[None])[..., None] == slot_ids) & valid[..., None]
            written = place.any(1)[..., None]
            place = place.to(inputs.dtype)
        outputs, new_state = [], []
        for i, layer in enumerate(self.layers):
            keys, values, fill = state[3 * i: 3 * i + 3]
            if empty:
                x, k, v, _ = layer.attend(x, keys[:, :0], values[:, :0], allowed, need_weights=False)
                outputs.append(x)
                if use_cache:  # training discards the cache; padding it out cost 634 -> 562 ms a step (B 64, T 16)
                    rows = new_fill[:, :cut, None]
                    new_state += [F.pad(k[:, :cut] * rows, (0, 0, 0, self.slots - cut)),
                                  F.pad(v[:, :cut] * rows, (0, 0, 0, self.slots - cut)), new_fill]
                continue
            x, k, v, _ = layer.attend(x, keys, values, allowed, need_weights=False)
            outputs.append(x)
            new_state += [torch.where(written, torch.einsum("btk,bth->bkh", place, k), keys),
                          torch.where(written, torch.einsum("btk,bth->bkh", place, v), values),
                          torch.maximum(fill, place.sum(1))]
        return self._pool(x, valid, state, lengths, outputs, new_state, use_cache)

    def _pool(self, x: torch.Tensor, valid: torch.Tensor, state: State, lengths: torch.Tensor, outputs: list,
              new_state: list, use_cache: bool) -> Tuple[List[torch.Tensor], Optional[State]]:
        """A chunk's pooled outputs from its top layer's `x` [B, T, H] (appended to the layers' `outputs`) and its
        new state (the layers' entries `new_state`, then the pooling's, count and mean)."""
        count, pooled = state[-2], state[-1]
        steps = torch.arange(x.shape[1], device=x.device)
        weights = self._pool_weights(count + 1 + steps[None]) * valid.to(x.dtype)  # [B, T]
        total = self._pooled_total(count, state)
        totals = total + torch.cumsum(weights, 1)
        sums = self._pooled_sum(count, pooled, total)[:, None] + torch.cumsum(x * weights[..., None].to(x.dtype), 1)
        means = sums / totals[..., None]
        output, pooling_state = self._pooled_output(x, valid, means, state)
        outputs.append(output)
        if not use_cache:
            return outputs, None
        new_state += pooling_state
        if self.pooling_exponent is not None:
            new_state.append(_gather_steps(totals[..., None], lengths, total))
        new_state += [count + lengths[:, None].to(count.dtype), _gather_steps(means, lengths, pooled)]
        return outputs, tuple(new_state)

    def _forward_evicting(self, inputs, state, lengths, use_cache):
        """`forward` where caches overflow, layer by layer: each layer's products run over every step at once, its
        attention over blocks of steps (each reads the cache as the block starts and the block's own keys: linear in
        the text's length), and only TOVA's choice of slot goes step by step (`_PostNormLayer.evictions`, where
        stepping the whole model cost ~40 ops a layer). Equals `_step_all` stepped."""
        b, t, _ = inputs.shape
        count = state[-2]
        steps = torch.arange(t, device=inputs.device)
        valid = steps[None] < lengths[:, None]
        x = self._embed(inputs, count + 1 + steps[None])
        block = max(32, self.slots)
        while block > 8 and b * self.config.num_attention_heads * block * (1 + self.slots + block) > 2 ** 23:
            block //= 2  # the block's scores within 32 MB
        outputs, new_state = [], []
        for i, layer in enumerate(self.layers):
            keys, values, fill = state[3 * i: 3 * i + 3]
            q, k, v = layer.project(x)
            mixed = []
            for start in range(0, t, block):
                part = slice(start, start + block)
                qb, kb, vb = q[:, part], k[:, part], v[:, part]
                allowed, held, filled = layer.evictions(qb, keys, kb, fill, lengths - start)
                mixed.append(layer.mix(qb, kb, vb, keys, values, allowed, need_weights=False)[0])
                index = held[..., None].expand(-1, -1, keys.shape[-1])
                keys, values = torch.cat([keys, kb], 1).gather(1, index), torch.cat([values, vb], 1).gather(1, index)
                fill = filled.to(fill.dtype)
            x = layer.finish(x, torch.cat(mixed, 1))  # the products after attention over every step at once
            outputs.append(x)
            new_state += [keys, values, fill]
        return self._pool(x, valid, state, lengths, outputs, new_state, use_cache)

    def _forward_open(self, inputs, state, lengths, use_cache, needed):
        """The parallel form with open tokens, from the empty state, no row longer than the cache. With
        `tail_open_tokens` the block is open above the first `tail_layers` layers only, which run causally."""
        b, t, _ = inputs.shape
        w, device, dtype = max(self.open, self.tail_open), inputs.device, inputs.dtype
        lower = self.config.tail_layers if self.tail_open > 1 else 0
        steps = torch.arange(t, device=device)
        valid = steps[None] < lengths[:, None]  # [B, T]
        block = steps // w
        # Steps whose open block is not the one the block-causal pass computes: a block's middle, unless the row
        # ends there (its last block is then just as open as the pass has it).
        middle = valid & (steps[None] % w != w - 1) & (steps[None] != lengths[:, None] - 1)
        if needed is not None:
            middle = middle & needed.bool()
        # Each middle step s adds its block's tokens up to s again, as one group of extra positions.
        sizes = (steps % w + 1)[None] * middle  # [B, T]
        flat = sizes.reshape(-1)
        owner = torch.repeat_interleave(torch.arange(b * t, device=device), flat)
        within = torch.arange(owner.numel(), device=device) - (torch.cumsum(flat, 0) - flat)[owner]
        row, group = owner // t, owner % t
        row_sizes = sizes.sum(1)
        column = torch.arange(owner.numel(), device=device) - (torch.cumsum(row_sizes, 0) - row_sizes)[row]
        extra = int(row_sizes.max()) if owner.numel() else 0
        source = torch.zeros(b, extra, dtype=torch.long, device=device)
        source[row, column] = (group // w) * w + within
        groups = torch.full((b, extra), -1, dtype=torch.long, device=device)
        groups[row, column] = group
        real = groups >= 0
        x = self._embed(inputs, 1 + steps[None])
        outputs, new_state = [], []
        if lower:  # causal layers: a block middle reads the same outputs there as the whole pass
            causal = (steps[:, None] >= steps[None])[None] & valid[:, None]
            rows = valid.to(dtype)[..., None]
            for i in range(lower):
                empty = state[3 * i][:, :0]
                x, k, v, _ = self.layers[i].attend(x, empty, empty, causal, need_weights=False)
                outputs.append(x)
                if use_cache:  # every real token in order (no row is longer than the cache)
                    pad = (0, 0, 0, self.slots - t)
                    new_state += [F.pad(k * rows, pad), F.pad(v * rows, pad), F.pad(rows[..., 0], pad[2:])]
        typed = x  # layer-K outputs (with `tail_open_tokens`, what the state holds of the open block)
        x = torch.cat([x, x.gather(1, source[..., None].expand(-1, -1, x.shape[-1]))], 1)
        main = (block[None, :] <= block[:, None])[None] & valid[:, None]  # [B, T, T]: block-causal
        earlier = (block[None, None, :] < (source // w)[..., None]) & valid[:, None]  # [B, E, T]
        same = (groups[:, :, None] == groups[:, None, :]) & real[:, :, None] & real[:, None, :]  # [B, E, E]
        allowed = torch.cat([torch.cat([main, main.new_zeros(b, t, extra)], -1), torch.cat([earlier, same], -1)], 1)
        # Only the real steps and extra positions go through the products: the extra positions are padded to the
        # row with the most of them, which a loss reading a random share of the block middles leaves far apart.
        places = torch.cat([valid, real], 1).reshape(-1).nonzero()[:, 0]
        x = x.reshape(b * (t + extra), -1).index_select(0, places)
        committed = (lengths // w) * w  # [B]: steps that have entered the cache
        kept = (steps[None] < committed[:, None]).to(dtype)
        for i in range(lower, len(self.layers)):
            layer, keys = self.layers[i], state[3 * i]
            x, k, v, _ = layer.attend(x, keys[:, :0], keys[:, :0], allowed, need_weights=False, places=places)
            outputs.append(_unpack(x, places, b, t + extra)[:, :t])
            if use_cache:
                pad = (0, 0, 0, self.slots - t)
                new_state += [F.pad(k[:, :t] * kept[..., None], pad), F.pad(v[:, :t] * kept[..., None], pad),
                              F.pad(kept, (0, self.slots - t))]
        x = _unpack(x, places, b, t + extra)
        weights = self._pool_weights((1 + steps[None]).to(dtype)) * valid.to(dtype)  # [B, T]
        top = x[:, :t] * weights[..., None]
        sums = torch.cumsum(top, 1)
        totals = 1 + torch.cumsum(weights, 1)
        start = block * w  # each step's block begins here
        before = torch.where((start > 0)[None, :, None], sums[:, (start - 1).clamp(min=0)], torch.zeros_like(sums))
        if extra:
            extra_weights = weights.gather(1, source) * real.to(dtype)
            regrouped = torch.zeros_like(sums).index_put_(
                (torch.arange(b, device=device)[:, None].expand(-1, extra), groups.clamp(min=0)),
                x[:, t:] * extra_weights[..., None], accumulate=True)
            open_sum = torch.where(middle[..., None], regrouped, sums - before)
        else:
            open_sum = sums - before
        means = (self.sink_output.to(dtype) + before + open_sum) / totals[..., None]
        outputs.append(means)
        if not use_cache:
            return outputs, None
        held = committed[:, None] + torch.arange(w - 1, device=device)[None]  # [B, W - 1]: the open steps
        if lower:  # `_step_upper_open`'s state, as after committing the whole text as one word
            block = typed.gather(1, held.clamp(max=t - 1)[..., None].expand(-1, -1, typed.shape[-1]))
            block = block * (held < lengths[:, None])[..., None].to(dtype)
            last = _gather_steps(open_sum, lengths, torch.zeros_like(state[-1]))  # the last block's outputs
            open_sum = torch.where((lengths % w != 0)[:, None], last, torch.zeros_like(last))  # 0: it committed
            new_state += [block, (lengths - committed)[:, None].to(dtype), open_sum]
            if self.pooling_exponent is not None:
                new_state.append(_gather_steps(totals[..., None], lengths, torch.zeros_like(state[-2])))
            return outputs, tuple(new_state) + (lengths[:, None].to(dtype), _gather_steps(means, lengths, state[-1]))
        open_inputs = inputs.gather(1, held.clamp(max=t - 1)[..., None].expand(-1, -1, inputs.shape[-1]))
        open_inputs = open_inputs * (held < lengths[:, None])[..., None].to(dtype)
        new_state += [open_inputs, (lengths - committed)[:, None].to(dtype)]
        zero_total = torch.zeros(b, 1, device=device, dtype=dtype)
        if self.pooling_exponent is not None:
            new_state.append(_gather_steps(totals[..., None], committed, zero_total))
        new_state += [committed[:, None].to(dtype), _gather_steps(means, committed, torch.zeros_like(state[-1]))]
        return outputs, tuple(new_state)

    def _step_open(self, inputs, state):
        """One step with open tokens: the open ones and this one run through every layer; a full block enters
        the cache (TOVA evicts, as in `_step_all`, the slots the block's queries weigh least)."""
        w, layers = self.open, len(self.layers)
        count, pooled = state[-2], state[-1]
        held, open_count = state[3 * layers], state[3 * layers + 1]
        b, device = inputs.shape[0], inputs.device
        before = open_count.long()[:, 0]  # [B] open tokens before this step
        position = torch.arange(w, device=device)
        pending = torch.cat([held, held.new_zeros(b, 1, held.shape[-1])], 1)
        pending = torch.where((position[None] == before[:, None])[..., None], inputs[:, None], pending)
        live = position[None] <= before[:, None]  # [B, W]
        commit = before == w - 1  # [B]
        x = self._embed(pending, count + 1 + position[None])
        newest = before.view(-1, 1, 1).expand(-1, 1, x.shape[-1])
        blocks, new_state = self._block_layers(x, live, commit, state, range(len(self.layers)))
        outputs = [y.gather(1, newest)[:, 0] for y in blocks]
        x = blocks[-1]
        weights = self._pool_weights(count + 1 + position[None].to(count.dtype)) * live.to(count.dtype)  # [B, W]
        total = self._pooled_total(count, state)
        out_total = total + weights.sum(1, keepdim=True)
        mean = (self._pooled_sum(count, pooled, total) + (x * weights[..., None]).sum(1)) / out_total
        outputs.append(mean)
        kept = commit[:, None]
        new_state += [torch.where(kept[..., None], torch.zeros_like(held), pending[:, :w - 1]),
                      torch.where(kept, torch.zeros_like(open_count), open_count + 1)]
        if self.pooling_exponent is not None:
            new_state.append(torch.where(kept, out_total, state[-3]))
        return outputs, tuple(new_state) + (torch.where(kept, count + w, count), torch.where(kept, mean, pooled))

    def _block_layers(self, x: torch.Tensor, live: torch.Tensor, commit: torch.Tensor, state: State, layers: range
                      ) -> Tuple[List[torch.Tensor], list]:
        """An open block x [B, W, H] (its `live` [B, W] positions real) through `layers` (consecutive indices), each
        position attending to the cache and to the block both ways; a row with `commit` [B] writes the block into each
        layer's cache, its W tokens in order (TOVA evicts, as in `_step_all`, the slots the block's queries weigh
        least). Returns each layer's outputs [B, W, H] and its new keys, values and fill, in order."""
        w = x.shape[1]
        outputs, new_state = [], []
        for i in layers:
            keys, values, fill = state[3 * i: 3 * i + 3]
            allowed = torch.cat([fill.bool()[:, None].expand(-1, w, -1), live[:, None].expand(-1, w, -1)], -1)
            x, k, v, weights = self.layers[i].attend(x, keys, values, allowed)
            outputs.append(x)
            slot_weight = weights[:, :, :, 1:1 + self.slots].mean((1, 2)).masked_fill(fill <= 0, float("inf"))
            for j in range(w):  # a committing row writes its W tokens in order, each where `_step_all` would
                used = fill.sum(-1)
                target = torch.where(used >= self.slots, slot_weight.argmin(-1), used.long().clamp(max=self.slots - 1))
                chosen = F.one_hot(target, self.slots).bool() & commit[:, None]
                keys = torch.where(chosen[..., None], k[:, j:j + 1], keys)
                values = torch.where(chosen[..., None], v[:, j:j + 1], values)
                fill = torch.where(chosen, torch.ones((), dtype=fill.dtype), fill)
                slot_weight = slot_weight.masked_fill(chosen, float("inf"))
            new_state += [keys, values, fill]
        return outputs, new_state

    def _step_upper_open(self, held: torch.Tensor, state: State) -> Tuple[State, List[torch.Tensor]]:
        """`step_upper` with `tail_open_tokens` W: the word's tokens join the upper layers' open block, each block of
        W that fills runs through the upper layers and enters their caches, and the block left open runs through them
        once more for the output (the pooled mean of the committed tokens' outputs and the open block's current ones,
        what the parallel form gives at the word's last step). State after the layers': the open block's
        layer-`tail_layers` outputs [W - 1, H], their count, and the weighted sum of their top-layer outputs [H]
        (which the mean holds until the block commits). Returns the state and each upper layer's output [B, H] at the
        word's last token."""
        w, k, layers = self.tail_open, self.config.tail_layers, len(self.layers)
        b, h, device = held.shape[0], held.shape[-1], held.device
        block, opened, open_sum = state[3 * layers: 3 * layers + 3]
        count, pooled = state[-2], state[-1]
        position = torch.arange(w, device=device)
        committed = count - opened  # tokens in the upper layers' caches (a multiple of W)
        before = opened.long()[:, 0]
        weights = self._pool_weights(committed + 1 + position[None].to(count.dtype))  # [B, W]: the block's weights
        total = self._pooled_total(count, state)
        done_total = total - (weights * (position[None] < before[:, None])).sum(1, keepdim=True)
        done_sum = self._pooled_sum(count, pooled, total) - open_sum
        entries = list(state[3 * k: 3 * layers])
        open_sum = torch.zeros_like(open_sum)
        for j in range(held.shape[1]):
            pending = torch.cat([block, block.new_zeros(b, 1, h)], 1)
            pending = torch.where((position[None] == before[:, None])[..., None], held[:, j:j + 1], pending)
            live = position[None] <= before[:, None]  # [B, W]
            commit = before == w - 1  # [B]
            if bool(commit.any()) or j == held.shape[1] - 1:  # else nothing reads the upper layers yet
                upper = (None,) * (3 * k) + tuple(entries)
                outputs, new_entries = self._block_layers(pending, live, commit, upper, range(k, layers))
                newest = before.view(-1, 1, 1).expand(-1, 1, h)
                newest = [y.gather(1, newest)[:, 0] for y in outputs]
                block_sum = (outputs[-1] * (weights * live.to(weights.dtype))[..., None]).sum(1)
                entries = new_entries
                kept = commit[:, None]
                done_sum = torch.where(kept, done_sum + block_sum, done_sum)
                done_total = torch.where(kept, done_total + weights.sum(1, keepdim=True), done_total)
                open_sum = torch.where(kept, torch.zeros_like(block_sum), block_sum)
                committed = torch.where(kept, committed + w, committed)
                weights = self._pool_weights(committed + 1 + position[None].to(count.dtype))
            block = torch.where(commit[:, None, None], torch.zeros_like(block), pending[:, :w - 1])
            before = torch.where(commit, torch.zeros_like(before), before + 1)
        opened = before[:, None].to(count.dtype)
        open_total = (weights * (position[None] < before[:, None])).sum(1, keepdim=True)
        mean = (done_sum + open_sum) / (done_total + open_total)
        tail = [done_total + open_total] if self.pooling_exponent is not None else []
        return (tuple(state[:3 * k]) + tuple(entries) + (block, opened, open_sum) + tuple(tail)
                + (committed + opened, mean)), newest

    def _step_all(self, inputs, state):
        if self.tail_open > 1:  # each token a word of its own: the full embedding after every token
            k = self.config.tail_layers
            x = self._embed(inputs[:, None], state[-2] + 1)
            lower, entries = self._step_layers(x, state, range(k))
            state, upper = self._step_upper_open(lower[-1][:, None], tuple(entries) + tuple(state[3 * k:]))
            return lower + upper + [state[-1]], state
        if self.open > 1:
            return self._step_open(inputs, state)
        x = self._embed(inputs[:, None], state[-2] + 1)
        outputs, entries = self._step_layers(x, state, range(len(self.layers)))
        output, pooled = self._step_pool(outputs[-1], state)
        return outputs + [output], tuple(entries) + pooled

    def _step_layers(self, x: torch.Tensor, state: State, layers: range) -> Tuple[List[torch.Tensor], list]:
        """One causal step of x [B, 1, H] through `layers` (consecutive indices): each layer's output [B, H] and its
        new keys, values and fill, in order."""
        outputs, new_state = [], []
        for i in layers:
            keys, values, fill = state[3 * i: 3 * i + 3]
            allowed = torch.cat([fill.bool(), fill.new_ones(fill.shape[0], 1, dtype=torch.bool)], -1)[:, None]
            x, k, v, weights = self.layers[i].attend(x, keys, values, allowed)
            outputs.append(x[:, 0])
            # TOVA: a full cache drops the slot the current query weighs least (averaged over heads).
            used = fill.sum(-1)
            slot_weight = weights[:, :, 0, 1:1 + self.slots].mean(1).masked_fill(fill <= 0, float("inf"))
            target = torch.where(used >= self.slots, slot_weight.argmin(-1), used.long().clamp(max=self.slots - 1))
            chosen = F.one_hot(target, self.slots).bool()
            new_state += [torch.where(chosen[..., None], k, keys), torch.where(chosen[..., None], v, values),
                          torch.where(chosen, torch.ones((), dtype=fill.dtype), fill)]
        return outputs, new_state

    def _step_pool(self, top: torch.Tensor, state: State) -> Tuple[torch.Tensor, tuple]:
        """The running (weighted) mean after one more top-layer output `top` [B, H]: (the cell's output [B, H], the
        state's entries after the layers': the pooling's, [total,] count, mean)."""
        count, pooled = state[-2], state[-1]
        total, weight = self._pooled_total(count, state), self._pool_weights(count + 1)
        mean = (self._pooled_sum(count, pooled, total) + weight * top) / (total + weight)
        output, pooling_state = self._pooled_output(top[:, None], top.new_ones(top.shape[0], 1, dtype=torch.bool),
                                                    mean[:, None], state)
        new_state = list(pooling_state)
        if self.pooling_exponent is not None:
            new_state.append(total + weight)
        return output[:, 0], tuple(new_state) + (count + 1, mean)

    def step_lower(self, inputs: torch.Tensor, state: State, held: int) -> Tuple[torch.Tensor, State]:
        """`tail_layers`: one token of the current word ([B, H] input vectors) through the lower `tail_layers` layers
        only, after the word's `held` earlier tokens (which the upper layers have not read, so `state`'s count leaves
        them out). Returns its layer-`tail_layers` output [B, H] and the state with the lower layers' caches stepped;
        the upper layers' and the pooling's are unchanged."""
        k = self.config.tail_layers
        x = self._embed(inputs[:, None], state[-2] + 1 + held)
        outputs, entries = self._step_layers(x, state, range(k))
        return outputs[-1], tuple(entries) + tuple(state[3 * k:])

    def step_upper(self, held: torch.Tensor, state: State) -> State:
        """`tail_layers`: a finished word's held layer-`tail_layers` outputs ([B, P, H], in order) through the upper
        layers and into the pooled mean, token by token as `_step_all` runs them (a causal layer's output for a
        token does not depend on when it is computed). With `tail_open_tokens`, `_step_upper_open`."""
        if self.tail_open > 1:
            return self._step_upper_open(held, state)[0]
        k = self.config.tail_layers
        for j in range(held.shape[1]):
            outputs, entries = self._step_layers(held[:, j:j + 1], state, range(k, len(self.layers)))
            _, pooled = self._step_pool(outputs[-1], state)
            state = tuple(state[:3 * k]) + tuple(entries) + pooled
        return state

    def held_pooled(self, held: torch.Tensor, state: State) -> torch.Tensor:
        """`tail_layers`: the output [B, H] with the current word's held layer-`tail_layers` outputs ([B, P, H])
        through `tail_adapter` in place of their top-layer outputs (`tail_pooled` at one step). With
        `tail_open_tokens` the state's mean already holds the upper layers' open block as the last word left it."""
        count, pooled = state[-2], state[-1]
        total = self._pooled_total(count, state)
        weights = self._pool_weights(count + 1 + torch.arange(held.shape[1], device=held.device)[None])  # [B, P]
        weight = weights.sum(1, keepdim=True)
        # The adapter is affine: it maps the word's weighted mean, once (the fused step's order of operations).
        typed = self.tail_adapter((held * weights[..., None]).sum(1) / weight) * weight
        return (self._pooled_sum(count, pooled, total) + typed) / (total + weight)

    def step(self, inputs, state):
        outputs, state = self._step_all(inputs, state)
        return outputs[-1], state


CELLS = {
    "gru": GRUCell,
    "lstm": LSTMCell,
    "linear_attention": LinearAttentionCell,
    "rem": REMCell,
    "multistate": MultiStateCell,
    "tova_attention": TOVAAttentionCell,
}


assert tuple(CELLS) == CELL_TYPES, "configuration_tf2rnn.CELL_TYPES names the cells of CELLS, in order"


def build_cell(config: TF2RNNConfig) -> TF2RNNCell:
    """The cell named by `config.cell_type`."""
    return CELLS[config.cell_type](config)
