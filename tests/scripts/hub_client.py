"""Hub client actions for tests, each in a fresh process whose environment points at the test server.

    hub_client.py push REPO FOLDER SEED      build a tiny student (seeded), save it, push; print commit + outputs
    hub_client.py load REPO [REVISION]       AutoModel/AutoTokenizer from the Hub; print outputs (JSON)
    hub_client.py st REPO                    SentenceTransformer from the Hub; print encode() outputs
    hub_client.py pull REPO [REVISION]       tf2rnn_hf.hub.pull (verified); print the folder
    hub_client.py validate REPO              validate the pulled card's metadata with the Hub's validator
"""

import json
import sys

TEXTS = ["search as you type", "streams and devices"]


def outputs(model, tokenizer):
    import torch

    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**batch).pooler_output.tolist()


def main(action, repo, *rest):
    if action == "push":
        import torch

        from tf2rnn_hf.distill import build_student
        from tf2rnn_hf.hub import push, save_student

        folder, seed = rest[0], int(rest[1])
        torch.manual_seed(seed)
        model, tok = build_student("built-in", hidden_size=16, token_init="input_embeddings")
        save_student(model, tok, folder, repo_id=repo)
        commit = push(folder, repo)
        return {"commit": commit, "out": outputs(model.eval(), tok)}
    if action == "load":
        from transformers import AutoModel, AutoTokenizer

        remote = "remote" in rest
        if not remote:
            import tf2rnn_hf  # noqa: F401  (registers the Auto classes: no trust_remote_code needed)
        revision = rest[0] if rest and rest[0] != "remote" else None
        model = AutoModel.from_pretrained(repo, revision=revision, trust_remote_code=remote).eval()
        tok = AutoTokenizer.from_pretrained(repo, revision=revision, trust_remote_code=remote)
        return {"cls": type(model).__module__, "out": outputs(model, tok)}
    if action == "st":
        from sentence_transformers import SentenceTransformer

        return {"out": SentenceTransformer(repo, device="cpu", trust_remote_code=True).encode(TEXTS).tolist()}
    if action == "pull":
        from tf2rnn_hf.hub import pull

        return {"folder": str(pull(repo, revision=rest[0] if rest else None))}
    if action == "validate":
        from huggingface_hub import ModelCard

        from tf2rnn_hf.hub import pull

        card = ModelCard.load(pull(repo) / "README.md")
        card.validate("model")  # POSTs the metadata to the Hub's validate-yaml endpoint
        return {"valid": True, "base_model": card.data.base_model}
    raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    if "--block-package" in sys.argv:
        sys.argv.remove("--block-package")
        import importlib.abc

        class _Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "tf2rnn_hf" or name.startswith("tf2rnn_hf."):
                    raise ModuleNotFoundError(f"blocked for this test: {name}")

        sys.meta_path.insert(0, _Block())
    print("RESULT " + json.dumps(main(*sys.argv[1:])), flush=True)
