"""Model cards rendered from `model_cards/template.md` with huggingface_hub's metadata, carrying the
evaluation results (a `model-index`) when there are any."""

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..data.teacher import BUILT_IN_ID
from ..evaluation.report import results_markdown

TEMPLATE = Path(__file__).parent / "model_card_template.md"
SUITE_DATASETS = {
    # suite: (dataset type, dataset name, metric keys)
    "bible": ("sword-kjv-web-paraphrase", "Bible KJV->WEB verse retrieval (2,000)", ("recall@1", "recall@10", "mrr")),
    "wordnet": ("wordnet-example-definition", "WordNet example->definition retrieval (2,000)",
                ("recall@1", "recall@10", "mrr")),
    "lee": ("lee-document-similarity", "Lee et al. 2005 document similarity", ("pearson", "spearman")),
    "wordsim": ("wordsim353-simlex999", "WordSim-353 / SimLex-999", ("wordsim353_spearman", "simlex999_spearman")),
    "sts-b": ("mteb/stsbenchmark-sts", "STS-B test (cosine Spearman x100)", ("spearman",)),
    "keystroke": ("tf2rnn-heldout-keystrokes", "Held-out per-keystroke fidelity to the teacher", ("keystroke_cosine",)),
    "fidelity": ("tf2rnn-heldout", "Held-out corpus fidelity to the teacher",
                 ("final_cosine", "prefix_cosine", "neighbour_agreement@10")),
    "long": ("tf2rnn-heldout-passages", "Held-out passages of 100-128 tokens: fidelity to the teacher",
             ("final_cosine", "prefix_cosine", "drift_65-128")),
}
TRAINING_DATA = ("The offline English corpus built by `tf2rnn_hf.data.corpus` from Debian packages: WordNet glosses, "
                 "fortunes, GCIDE, FOLDOC and the Jargon File, cleaned, sentence-split and deduplicated, with a "
                 "2% held-out split by a stable hash. WordNet synsets used for evaluation, Bible verses and the Lee "
                 "documents are kept out of training.")
BUILT_IN_CORPORA = {"offline": "", "offline-xl": " With `offline-xl`, the English software documentation of Debian "
                                                 "packages too (each source's licence recorded in the corpus)."}


def _shown(source: str) -> str:
    """A corpus or model as a card shows it: a Hub id as it is, a local path by its last name only."""
    path = Path(source)
    return path.name if path.exists() or source.startswith((".", "/", "~")) else source


def training_data(corpus: str = "offline", init_from: Optional[str] = None, eval_corpus: Optional[str] = None) -> str:
    """What a card says the student trained on: the built-in corpus, or the run's own (`--corpus`), and the student it
    continued from (`--init_from`)."""
    if corpus in BUILT_IN_CORPORA:
        text = TRAINING_DATA + BUILT_IN_CORPORA[corpus]
    else:
        held = (f"held-out figures from `{_shown(eval_corpus)}`" if eval_corpus else
                "2% of its texts held out of training by a stable hash for the held-out figures")
        text = f"`{_shown(corpus)}`, the distiller's own text ({held})."
    if init_from:
        text += f" Continued from `{_shown(init_from)}`: its weights, and what it trained on (its own card)."
    return text


def eval_results(results: Optional[dict], model_name: str) -> List[EvalResult]:
    """The student's numbers from `evaluate_model` output as model-index entries."""
    out = []
    for suite, table in ((results or {}).get("suites") or {}).items():
        if suite not in SUITE_DATASETS or "student" not in table:
            continue
        dtype, dname, keys = SUITE_DATASETS[suite]
        for key in keys:
            if key in table["student"]:
                out.append(EvalResult(task_type="sentence-similarity", dataset_type=dtype, dataset_name=dname,
                                      metric_type=key, metric_value=round(float(table["student"][key]), 4)))
    return out


def render_model_card(config, results: Optional[dict] = None, repo_id: str = "tf2rnn/tf2rnn-minilm",
                      state_bytes: Optional[int] = None, max_tokens: int = 64,
                      extra_markdown: Optional[str] = None, weight_bits: Optional[int] = None,
                      corpus: str = "offline", init_from: Optional[str] = None,
                      eval_corpus: Optional[str] = None, weight_keep: Sequence[str] = (),
                      weight_group: Optional[int] = None) -> ModelCard:
    """A ModelCard for a student with this config (and evaluation results, if any); `extra_markdown`
    (such as the cell comparison) follows the results; `weight_bits`, where it trained through rounded weights,
    `weight_group`, the columns per scale where not a row, and `weight_keep`, the layers it left unrounded;
    `corpus`, `init_from` and `eval_corpus`, the distillation's (`training_data`)."""
    teacher = config.teacher_name_or_path or BUILT_IN_ID
    name = repo_id.split("/")[-1]
    data = ModelCardData(
        language="en", license="apache-2.0", library_name="transformers", pipeline_tag="sentence-similarity",
        base_model=teacher, tags=["tf2rnn", "sentence-transformers", "feature-extraction", "rnn", "distillation",
                                  "streaming", config.cell_type],
        model_name=name, eval_results=eval_results(results, name) or None)
    markdown = results_markdown(results) if results and results.get("suites") else "Not evaluated yet."
    return ModelCard.from_template(
        data, template_path=str(TEMPLATE), model_name=name, teacher=teacher, repo_id=repo_id,
        cell_type=config.cell_type, num_hidden_layers=config.num_hidden_layers, hidden_size=config.hidden_size,
        open_tokens=f", the newest {config.open_tokens} tokens open" if config.open_tokens > 1 else "",
        output_size=config.output_size, state_bytes=state_bytes if state_bytes is not None else "n/a",
        results_markdown=markdown, training_data=training_data(corpus, init_from, eval_corpus), max_tokens=max_tokens,
        built_in_corpus=corpus in BUILT_IN_CORPORA, corpus=_shown(corpus),
        extra_markdown=(extra_markdown or "").strip(), weight_bits=weight_bits,
        weight_keep=_kept(weight_keep), weight_group=weight_group)


def _kept(weight_keep: Sequence[str]) -> str:
    """`--weight_keep`'s names as the card's weights line reads them: a name's last part in every layer, a module by
    its name ("each layer's down", "`cell.layers.2`"); "" for none."""
    every = [k for k in weight_keep if "." not in k]
    return "; ".join(([f"each layer's {', '.join(every)}"] if every else []) +
                     [f"`{k}`" for k in weight_keep if "." in k])


def _training_arg(path: Union[str, Path], group: str, name: str, default=None):
    """One option of the distillation that wrote `path`'s results.json (`args[group][name]`); `default` where there
    is none."""
    try:
        value = json.loads((Path(path) / "results.json").read_text())["args"][group][name]
    except (OSError, KeyError, TypeError, ValueError):
        return default
    return default if value is None else value


def write_model_card(path: Union[str, Path], config, results: Optional[dict] = None,
                     repo_id: Optional[str] = None, state_bytes: Optional[int] = None,
                     extra_markdown: Optional[str] = None) -> Path:
    """Render and save README.md in a model folder."""
    card = render_model_card(config, results, repo_id or f"tf2rnn/{Path(path).name}", state_bytes,
                             max_tokens=int(_training_arg(path, "data", "max_tokens", 64)),
                             extra_markdown=extra_markdown, weight_bits=_training_arg(path, "training", "weight_bits"),
                             corpus=_training_arg(path, "data", "corpus", "offline"),
                             init_from=_training_arg(path, "model", "init_from"),
                             eval_corpus=_training_arg(path, "data", "eval_corpus"),
                             weight_keep=_training_arg(path, "training", "weight_keep") or (),
                             weight_group=_training_arg(path, "training", "weight_group"))
    target = Path(path) / "README.md"
    card.save(str(target))
    return target


def card_metadata(path: Union[str, Path]) -> Dict:
    """The parsed metadata of a saved card (for checks)."""
    return ModelCard.load(str(path)).data.to_dict()
