"""The `tf2rnn` command: distill, evaluate, card, plot, encode, stream, demo, export, push, pull."""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import List, Optional


def _load(model_path: str, int8: bool = False):
    from transformers import AutoTokenizer

    from .models import TF2RNNModel

    model = TF2RNNModel.from_pretrained(model_path).eval()
    if int8:
        from .inference.quantization import quantize_int8

        model = quantize_int8(model, inplace=True)
    return model, AutoTokenizer.from_pretrained(model_path)


def cmd_distill(args, rest: List[str]) -> int:
    """Run the distillation job (`tf2rnn distill --help` lists its options)."""
    from .distill.recipe import main

    main(rest)
    return 0


def cmd_evaluate(args, rest) -> int:
    """Evaluate a saved student on the chosen suites; write results.json and results.md."""
    from .evaluation import ALL_SUITES, evaluate_model, results_markdown

    if args.texts:  # the user's own text: free-running fidelity on it, unless other suites are asked for
        if not Path(args.texts).is_file():
            raise SystemExit(f"error: --texts {args.texts} is not a file (one text per line, or .jsonl).")
        args.corpus = args.texts
    suites = args.suites.split(",") if args.suites else (["fidelity"] if args.texts else list(ALL_SUITES))
    unknown = [suite for suite in suites if suite not in ALL_SUITES]
    if unknown:
        raise SystemExit(f"error: unknown suite {', '.join(map(repr, unknown))}; choose from {', '.join(ALL_SUITES)}.")
    results = evaluate_model(args.model, args.teacher, suites, corpus=args.corpus, n_texts=args.n_texts,
                             baselines=not args.no_baselines)
    out = Path(args.output or Path(args.model) / "eval")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    markdown = results_markdown(results)
    (out / "results.md").write_text(markdown + "\n")
    print(markdown)
    print(f"\nwrote {out / 'results.json'} and {out / 'results.md'}")
    if args.card:
        _write_card(args.model, results, args.card, args.card_extra)
    return 0


def _write_card(model_path: str, results: dict, repo_id: str, extra: Optional[str]) -> None:
    from .hub.save import write_card
    from .models import TF2RNNModel

    model = TF2RNNModel.from_pretrained(model_path)
    extra_markdown = Path(extra).read_text() if extra else None
    card = write_card(model, model_path, results, repo_id=repo_id, extra_markdown=extra_markdown)
    print(f"wrote the model card {card} for {repo_id}")


def cmd_card(args, rest) -> int:
    """Write a model's card from saved results (no re-evaluation)."""
    results_path = Path(args.results or Path(args.model) / "eval" / "results.json")
    if not results_path.is_file():
        raise SystemExit(f"error: no results at {results_path}; run `tf2rnn evaluate {args.model}` first.")
    _write_card(args.model, json.loads(results_path.read_text()), args.repo_id, args.extra)
    return 0


def cmd_plot(args, rest) -> int:
    """Draw the trajectory picture, and drift and suite charts from saved results."""
    from .data.teacher import Teacher
    from .plotting import plot_drift, plot_suites, plot_trajectories

    model, tokenizer = _load(args.model)
    out = Path(args.output)
    written = [plot_trajectories(model, tokenizer, Teacher(args.teacher), args.texts, out / "trajectories.png")]
    if args.results:
        results = json.loads(Path(args.results).read_text())
        suites = results.get("suites", results)
        if "fidelity" in suites and "skipped" not in suites["fidelity"]:
            written.append(plot_drift(suites["fidelity"], out / "drift.png"))
        written.append(plot_suites(suites, out / "suites.png"))
    print("\n".join(str(p) for p in written))
    return 0


def _read_lines(source: str) -> List[str]:
    if source != "-" and Path(source).is_dir():
        raise SystemExit(f"error: --input {source} is a directory; give a file with one text per line.")
    if source != "-" and not Path(source).is_file():
        raise SystemExit(f"error: --input {source} does not exist.")
    raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        where = "standard input" if source == "-" else source
        raise SystemExit(f"error: {where} is not valid UTF-8 (byte {err.start}: {raw[err.start:err.start + 1]!r}); "
                         "re-encode it, e.g. with iconv -f latin1 -t utf-8.")
    return text.splitlines()


def cmd_encode(args, rest) -> int:
    """Embed one text per line into .npy or .jsonl."""
    import numpy as np

    from .inference.encode import encode_texts

    out = Path(args.output)
    if out.suffix not in (".npy", ".jsonl"):
        raise SystemExit(f"error: --output must end in .npy or .jsonl, got {out.name}")
    if not out.parent.is_dir():
        raise SystemExit(f"error: the output folder {out.parent} does not exist.")
    model, tokenizer = _load(args.model, args.int8)
    lines = _read_lines(args.input)
    emb = encode_texts(model, tokenizer, lines).numpy() if lines else np.zeros((0, model.config.output_size))
    if out.suffix == ".npy":
        np.save(out, emb.astype(np.float32))
    elif out.suffix == ".jsonl":
        with out.open("w") as f:
            for line, vec in zip(lines, emb):
                f.write(json.dumps({"text": line, "embedding": [round(float(x), 7) for x in vec]}) + "\n")
    print(f"encoded {len(lines)} texts -> {out} {tuple(emb.shape)}", file=sys.stderr)
    return 0


def cmd_stream(args, rest) -> int:
    """Search as you type: each keystroke updates the query embedding and re-ranks the index."""
    import termios
    import tty
    from importlib.resources import files

    import torch

    from .inference.encode import encode_texts
    from .inference.streaming import StreamingEncoder

    torch.set_flush_denormal(True)  # denormals made the recurrent step 1.5x slower in a profile
    model, tokenizer = _load(args.model, args.int8)
    index_text = Path(args.index).read_text() if args.index else (files("tf2rnn_hf") / "data" / "demo_index.txt"
                                                                  ).read_text()
    docs = [d for d in index_text.splitlines() if d.strip()]
    doc_emb = encode_texts(model, tokenizer, docs)
    stream = StreamingEncoder(model, tokenizer)
    interactive = sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin) if interactive else None
    out = sys.stdout

    def show(micros: Optional[float]) -> None:
        scores = doc_emb @ stream.embedding if stream.text.strip() else torch.zeros(len(docs))
        top = scores.topk(min(args.top, len(docs)))
        timing = f"{micros:8.0f} µs/update" if micros is not None else ""
        out.write("\x1b[2J\x1b[H" if interactive else "\n")
        out.write(f"query> {stream.text}\n{timing}   (Esc or Ctrl-D quits)\n")
        for rank, (score, i) in enumerate(zip(top.values.tolist(), top.indices.tolist()), start=1):
            out.write(f"{rank}. [{score:+.3f}] {docs[i]}\n")
        out.flush()

    try:
        if interactive:
            tty.setcbreak(sys.stdin.fileno())
        show(None)
        while True:
            char = sys.stdin.read(1)
            if char in ("", "\x04", "\x1b"):
                break
            start = time.perf_counter()
            if char in ("\x7f", "\x08"):
                if stream.text:
                    stream.delete(1)
            elif char in ("\r", "\n"):
                stream.reset()
            elif char.isprintable() or char == " ":
                stream.type(char)
            else:
                continue
            show((time.perf_counter() - start) * 1e6)
    finally:
        if saved is not None:
            termios.tcsetattr(sys.stdin, termios.TCSADRAIN, saved)
    return 0


def cmd_push(args, rest) -> int:
    """Upload a saved student folder to the Hub."""
    from .hub.sync import push

    print(push(args.folder, args.repo_id, private=args.private))
    return 0


def cmd_pull(args, rest) -> int:
    """Download a student from the Hub, verifying every file's hash."""
    from .hub.sync import pull

    print(pull(args.repo_id, revision=args.revision, local_dir=args.output))
    return 0


def cmd_demo(args, rest) -> int:
    """Serve the search-as-you-type app (Gradio): student and teacher top-10 side by side per keystroke."""
    from .data.teacher import Teacher, teacher_name_of
    from .demo.app import build_app

    model, tokenizer = _load(args.model, args.int8)
    teacher = Teacher(args.teacher or teacher_name_of(model.config.teacher_name_or_path))
    app = build_app(model, tokenizer, teacher, index=args.index, n_texts=args.n_texts)
    app.launch(server_name=args.host, server_port=args.port, share=False, prevent_thread_lock=False)
    return 0


def cmd_export(args, rest) -> int:
    """Write the student's ONNX graphs (step, sequence), their manifest and the tokenizer to a folder."""
    from .inference.onnx import export_onnx

    model, tokenizer = _load(args.model)
    manifest = export_onnx(model, tokenizer, args.output, int8=args.int8)
    files = [g[k] for g in manifest["graphs"].values() for k in ("file", "int8_file") if k in g]
    print(f"wrote {', '.join(files)} and tf2rnn_onnx.json to {args.output}", file=sys.stderr)
    if manifest["sequence_graph"]:
        print(f"sequence graph {manifest['sequence_graph']}", file=sys.stderr)
    return 0


INT8_HELP = ("Int8 weights on CPU, keystrokes in one fused native step (benchmarks/results/benchmarks.md: ~25x "
             "faster per keystroke than fp32 for tf2rnn-minilm; typed token by token, 0.999 cosine to the fp32 "
             "model for the make-distill student of its shape, benchmarks/results/onnx.json).")


def build_parser() -> argparse.ArgumentParser:
    """The `tf2rnn` argument parser, one sub-command per verb."""
    from .evaluation.suites import ALL_SUITES

    parser = argparse.ArgumentParser(prog="tf2rnn", description="Recurrent students of transformer sentence encoders.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("distill", help="Distil a student (all options: tf2rnn distill --help).", add_help=False)
    p.set_defaults(func=cmd_distill)

    p = sub.add_parser("evaluate", help="Evaluate a saved student against its teacher and baselines.")
    p.add_argument("model")
    p.add_argument("--teacher", default=None, help="Teacher ('built-in', folder or Hub id); default: the model's.")
    p.add_argument("--suites", default=None, help="Comma-separated suites (default all): " + ",".join(ALL_SUITES) + ".")
    p.add_argument("--corpus", default="offline", help="Held-out text for the fidelity suite.")
    p.add_argument("--texts", default=None, metavar="FILE",
                   help="Your own text (one per line, or .jsonl with a 'text' field): fidelity to the teacher on it.")
    p.add_argument("--n-texts", type=int, default=1000)
    p.add_argument("--no-baselines", action="store_true")
    p.add_argument("--output", default=None, help="Folder for results.json and results.md (default MODEL/eval).")
    p.add_argument("--card", default=None, metavar="REPO_ID",
                   help="Also re-render MODEL/README.md with these results, for the Hub repo REPO_ID.")
    p.add_argument("--card-extra", default=None, metavar="FILE",
                   help="Markdown to add to the card after the results (e.g. a cell comparison).")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("card", help="Write MODEL/README.md from saved evaluation results (no re-evaluation).")
    p.add_argument("model")
    p.add_argument("repo_id", help="The Hub repo the card is for (used in its usage examples).")
    p.add_argument("--results", default=None, help="A results.json from `tf2rnn evaluate` (default MODEL/eval).")
    p.add_argument("--extra", default=None, metavar="FILE", help="Markdown to add after the results.")
    p.set_defaults(func=cmd_card)

    p = sub.add_parser("plot", help="Trajectory picture (and drift/suite charts from a results.json).")
    p.add_argument("model")
    p.add_argument("--output", required=True)
    p.add_argument("--teacher", default="built-in")
    p.add_argument("--results", default=None)
    p.add_argument("--texts", nargs="+", default=["Hello world", "The cat sat on the mat", "Search as you type"])
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("encode", help="Embed one text per line (a file, or - for stdin) to .npy or .jsonl.")
    p.add_argument("model")
    p.add_argument("--input", default="-")
    p.add_argument("--output", required=True)
    p.add_argument("--int8", action="store_true", help=INT8_HELP)
    p.set_defaults(func=cmd_encode)

    p = sub.add_parser("stream", help="Interactive search-as-you-type demo in the terminal.")
    p.add_argument("model")
    p.add_argument("--index", default=None, help="One document per line (default: a small built-in index).")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--int8", action="store_true", help=INT8_HELP)
    p.set_defaults(func=cmd_stream)

    p = sub.add_parser("demo", help="Search-as-you-type web app (Gradio): student and teacher, per keystroke.")
    p.add_argument("model")
    p.add_argument("--index", default=None, help="One document per line (default: --n-texts offline sentences).")
    p.add_argument("--n-texts", type=int, default=10_000, help="Offline sentences to index without --index.")
    p.add_argument("--teacher", default=None, help="Teacher ('built-in', folder or Hub id); default: the model's.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--int8", action="store_true", help=INT8_HELP)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("export", help="Export a student for other runtimes (ONNX: step and sequence graphs).")
    p.add_argument("model")
    p.add_argument("output", help="Folder to write (created if missing).")
    p.add_argument("--format", default="onnx", choices=["onnx"])
    p.add_argument("--int8", action="store_true", help="Also int8 graphs (onnxruntime dynamic quantization).")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("push", help="Upload a saved student folder to the Hub.")
    p.add_argument("folder")
    p.add_argument("repo_id")
    p.add_argument("--private", action="store_true")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("pull", help="Download a student from the Hub.")
    p.add_argument("repo_id")
    p.add_argument("--revision", default=None)
    p.add_argument("--output", default=None)
    p.set_defaults(func=cmd_pull)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run `tf2rnn` with `argv`; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if argv and argv[0] == "distill":  # its options belong to HfArgumentParser
        return cmd_distill(None, argv[1:])
    args, rest = parser.parse_known_args(argv)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    from huggingface_hub import constants
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    repo = getattr(args, "repo_id", None) or getattr(args, "model", None)
    try:
        return args.func(args, rest)
    except RevisionNotFoundError:
        message = f"revision {getattr(args, 'revision', None)!r} does not exist in {repo}."
    except RepositoryNotFoundError:
        message = f"repository {repo} does not exist on {constants.ENDPOINT} (or this token cannot see it)."
    except _network_errors() as err:
        message = f"cannot reach the Hub at {constants.ENDPOINT} for {repo}: {_first_line(err)}"
    except (OSError, ValueError, TypeError, RuntimeError) as err:
        # Our errors name the problem; the traceback would only bury it (TF2RNN_DEBUG=1 shows it).
        if os.environ.get("TF2RNN_DEBUG"):
            raise
        message = _first_line(err)
        if repo and str(repo) not in message:
            message += f" ({repo})"
    print(f"error: {message}", file=sys.stderr)
    return 2


def _network_errors() -> tuple:
    """The exception types of a Hub request that failed on the way (whichever HTTP client the hub uses)."""
    from huggingface_hub.errors import HfHubHTTPError

    found = [HfHubHTTPError]
    try:
        import httpx2

        found.append(httpx2.HTTPError)
    except ImportError:
        pass
    try:
        import requests

        found.append(requests.RequestException)
    except ImportError:
        pass
    return tuple(found)


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split("\n")[0].split())


if __name__ == "__main__":
    sys.exit(main())
