"""ONNX export of a student: the graphs a runtime without PyTorch needs to stream embeddings.

`export_onnx(model, tokenizer, directory)` writes
- `step.onnx`: one token per row and the state in, the embedding and the new state out (a keystroke);
- `sequence.onnx`: token ids and attention mask [batch, steps] and a state in, the trajectory (the
  embedding after every position) and the state after the last real step out: encoding whole texts, or
  a chunk of a stream; GRU students (the other cells' sequence forms branch on values, which an exported
  graph cannot);
- `tf2rnn_onnx.json`: the state tensors in order (name, shape per row, dtype; every one starts at zero),
  the graphs' input and output names, and the ids a runtime must skip (special tokens are no-ops);
- the tokenizer files and the model's config.json, so one folder is all a runtime (onnxruntime,
  onnxruntime-web) needs;
- with `int8`, `step.int8.onnx` / `sequence.int8.onnx` besides: onnxruntime's dynamic quantization
  (int8 weights of the matrix products).

Graph names: inputs `input_ids` (and `attention_mask`), then `state_in.<name>` for each state tensor;
outputs `sentence_embedding` (step) or `trajectory` (sequence), then `state_out.<name>` in the same order, so a
runtime feeds each `state_out.X` back as `state_in.X` (the step graph's new `last_embedding` is its
`sentence_embedding` output, not a second copy). Embeddings are L2-normalised, as the model's.

`ONNXStudent(directory)` runs the step graph with onnxruntime behind the model's own `init_state` / `step`
interface, so `StreamingEncoder(ONNXStudent(directory), tokenizer)` types and deletes through ONNX.
"""

import json
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Union

import torch
from torch import nn

from ..models import TF2RNNConfig, TF2RNNModel, TF2RNNState

MANIFEST = "tf2rnn_onnx.json"
SEQUENCE_CELLS = ("gru",)


def state_names(model: TF2RNNModel) -> List[str]:
    """Names of the state tensors, in `TF2RNNState` order: the cell's, then the model's running values."""
    cells = [f"cell_{i}" for i in range(len(model.cell.state_shapes()))]
    return cells + ["token_sum", "seen_tokens", "last_embedding"]


class _StepGraph(nn.Module):
    def __init__(self, model: TF2RNNModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, state: tuple):
        emb, new = self.model.step_reference(input_ids, TF2RNNState._from_tensors(state))
        return (emb, *new._tensors()[:-1])  # the new last_embedding is the embedding: one output, not two


class _SequenceGraph(nn.Module):
    def __init__(self, model: TF2RNNModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *state: torch.Tensor):
        out = self.model(input_ids, attention_mask=attention_mask, past_state=TF2RNNState._from_tensors(state),
                         use_cache=True, return_dict=True)
        return (out.last_hidden_state, *out.past_state._tensors())


def _export(graph: nn.Module, args: tuple, dynamic_shapes: tuple, input_names: List[str], output_names: List[str],
            path: Path) -> None:
    with warnings.catch_warnings():  # the exporter warns at length about internals it handles
        warnings.simplefilter("ignore")
        program = torch.onnx.export(graph, args, dynamo=True, dynamic_shapes=dynamic_shapes, external_data=False,
                                    input_names=input_names, output_names=output_names, verbose=False)
    program.save(str(path))


def _check_dynamic(path: Path) -> None:
    """Refuse a graph whose batch (or sequence) axis an exporter fixed to the example's size: it would fail,
    or answer wrongly, on any other shape."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    for tensor in graph.input:
        dims = tensor.type.tensor_type.shape.dim
        wanted = 2 if tensor.name in ("input_ids", "attention_mask") and len(dims) == 2 else 1
        fixed = [i for i, d in enumerate(dims[:wanted]) if not d.dim_param]
        if fixed:
            raise RuntimeError(f"The exporter fixed axis {fixed[0]} of {tensor.name} in {path.name} to "
                               f"{dims[fixed[0]].dim_value}; this export would not run on other shapes.")


def export_onnx(model: TF2RNNModel, tokenizer, directory: Union[str, Path], int8: bool = False,
                sequence: Optional[bool] = None) -> Dict:
    """Write the ONNX graphs, the manifest and the tokenizer of `model` to `directory`; returns the manifest.

    `sequence`: also the sequence graph (default: where the cell supports it; True refuses a cell that
    does not). Needs the `onnx` extra (onnx, onnxscript; onnxruntime for `int8`)."""
    for name in ("onnx", "onnxscript") + (("onnxruntime",) if int8 else ()):
        try:
            __import__(name)
        except ImportError:
            raise ImportError(f"ONNX export needs {name}: pip install 'tf2rnn-hf[onnx]'.") from None
    if any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in model.modules()):
        raise ValueError("Export the fp32 model: an int8 (quantize_int8) model holds PyTorch-only modules. "
                         "Use --int8 to quantize the ONNX graphs instead.")
    if model.dtype != torch.float32 or model.device.type != "cpu":
        raise ValueError(f"Export a float32 model on CPU (this one is {model.dtype} on {model.device}); "
                         "use model.float().cpu().")
    cell = model.config.cell_type
    if sequence is None:
        sequence = cell in SEQUENCE_CELLS
    elif sequence and cell not in SEQUENCE_CELLS:
        raise ValueError(f"The sequence graph covers {', '.join(SEQUENCE_CELLS)} students, not {cell!r}: "
                         "their sequence forms branch on values. Export the step graph alone (sequence=False).")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    names = state_names(model)
    example = model.init_state(2)
    if any(bool(t.any()) for t in example._tensors()):
        raise RuntimeError("The manifest says every state tensor starts at zero; this model's do not.")
    state = tuple(example._tensors())
    batch = torch.export.Dim("batch", min=1, max=65536)
    state_in, state_out = [f"state_in.{n}" for n in names], [f"state_out.{n}" for n in names]
    graphs = {}
    with torch.no_grad():
        rows = ({0: batch}, tuple({0: batch} for _ in state))
        outputs = ["sentence_embedding", *state_out[:-1]]
        _export(_StepGraph(model), (torch.tensor([1, 2]) % model.config.vocab_size, state), rows,
                ["input_ids", *state_in], outputs, directory / "step.onnx")
        graphs["step"] = {"file": "step.onnx", "inputs": ["input_ids", *state_in], "outputs": outputs,
                          "state_out.last_embedding": "sentence_embedding"}
        if sequence:
            # TorchScript's exporter: the dynamo exporter infers aten.gru's shapes through a decomposition
            # unrolled over the example's steps, which freezes the sequence length into the graph.
            ids = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 0]]) % model.config.vocab_size
            mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])  # a padded row: the graph keeps the masked path
            inputs, outputs = ["input_ids", "attention_mask", *state_in], ["trajectory", *state_out]
            axes = {name: {0: "batch"} for name in inputs + outputs}
            axes.update({name: {0: "batch", 1: "steps"} for name in ("input_ids", "attention_mask", "trajectory")})
            with warnings.catch_warnings():  # it warns that it is deprecated, and about traced Python values
                warnings.simplefilter("ignore")
                torch.onnx.export(_SequenceGraph(model), (ids, mask, *state), str(directory / "sequence.onnx"),
                                  dynamo=False, input_names=inputs, output_names=outputs, dynamic_axes=axes,
                                  opset_version=17)
            graphs["sequence"] = {"file": "sequence.onnx", "inputs": inputs, "outputs": outputs}
    for graph in graphs.values():
        _check_dynamic(directory / graph["file"])
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        for graph in list(graphs.values()):
            target = graph["file"].replace(".onnx", ".int8.onnx")
            # One scale per output channel, as quantize_int8 and the fused steps keep: per tensor (the default) left
            # an inherited student's int8 graphs at 0.96 cosine to fp32, per channel at 0.998.
            quantize_dynamic(directory / graph["file"], directory / target, weight_type=QuantType.QInt8,
                             per_channel=True)
            graph["int8_file"] = target
    manifest = {
        "format": "tf2rnn-onnx", "version": 1, "cell_type": cell, "output_size": model.config.output_size,
        "skip_token_ids": list(model.config.skip_token_ids or []),
        "state": [{"name": n, "shape": ["batch", *t.shape[1:]], "dtype": str(t.dtype).replace("torch.", ""),
                   "initial": 0} for n, t in zip(names, state)],
        "graphs": graphs,
        "sequence_graph": None if sequence else (
            "not exported (sequence=False)" if cell in SEQUENCE_CELLS else
            f"not exported ({cell!r} students' sequence forms branch on values; step token by token instead)"),
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    tokenizer.save_pretrained(str(directory))
    model.config.save_pretrained(str(directory))
    return manifest


class ONNXStudent:
    """An exported student's step graph in onnxruntime, with the model's `init_state` / `step` interface
    (torch tensors in and out), so the streaming encoders run on it unchanged.

    >>> student = ONNXStudent("onnx-dir", int8=True)   # step.int8.onnx
    >>> StreamingEncoder(student, tokenizer).type("search as you type")
    """

    def __init__(self, directory: Union[str, Path], int8: bool = False, threads: Optional[int] = None):
        import onnxruntime as ort

        directory = Path(directory)
        if not (directory / MANIFEST).is_file():
            raise FileNotFoundError(f"{directory} has no {MANIFEST}: export it with `tf2rnn export MODEL DIR "
                                    "--format onnx`.")
        self.manifest = json.loads((directory / MANIFEST).read_text())
        self.config = TF2RNNConfig.from_pretrained(str(directory))
        step = self.manifest["graphs"]["step"]
        file = step.get("int8_file") if int8 else step["file"]
        if file is None:
            raise FileNotFoundError(f"{directory} holds no int8 graphs: export with --int8.")
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(directory / file), options, providers=["CPUExecutionProvider"])
        self._inputs, self._outputs = step["inputs"], step["outputs"]
        self._state = self.manifest["state"]

    def eval(self) -> "ONNXStudent":
        return self

    def init_state(self, batch_size: int, device=None, dtype=None) -> TF2RNNState:
        """Zeros of the manifest's state shapes for `batch_size` rows."""
        dtypes = {"float32": torch.float32, "int64": torch.long}
        return TF2RNNState._from_tensors([torch.zeros(batch_size, *s["shape"][1:], dtype=dtypes[s["dtype"]])
                                          for s in self._state])

    def step(self, input_ids: torch.Tensor, past_state: Optional[TF2RNNState] = None):
        """(embedding [batch, output_size], new state) after one token per row, as `TF2RNNModel.step`."""
        ids = input_ids.reshape(-1)
        state = past_state if past_state is not None else self.init_state(ids.shape[0])
        feeds = {"input_ids": ids.numpy()}
        feeds.update({name: t.contiguous().numpy() for name, t in zip(self._inputs[1:], state._tensors())})
        emb, *new = self.session.run(self._outputs, feeds)
        emb = torch.from_numpy(emb)
        return emb, TF2RNNState._from_tensors([torch.from_numpy(t) for t in new] + [emb])
