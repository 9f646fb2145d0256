"""Saving a student with everything a user of the Hub expects (weights, config with auto_map, custom
code, tokenizer, sentence-transformers files, model card), and pushing/pulling it."""

import json
from pathlib import Path
from typing import Optional, Union

from huggingface_hub import HfApi, snapshot_download

ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def write_sentence_transformers_files(path: Union[str, Path], config, max_seq_length: Optional[int] = None) -> None:
    """modules.json and configs so `SentenceTransformer(path)` loads the student: the Transformer module
    returns the trajectory, last-token pooling reads the embedding after the last step (special tokens are
    no-ops, so the [SEP] position repeats it), then normalisation (a no-op on unit vectors). Inputs are cut
    at `max_seq_length` steps: default 256 tokens, or 1,024 bytes for a byte student."""
    path = Path(path)
    dim = config.output_size
    if max_seq_length is None:
        max_seq_length = 1024 if getattr(config, "granularity", "token") == "byte" else 256
    (path / "modules.json").write_text(json.dumps(ST_MODULES, indent=2))
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length,
                                                                "do_lower_case": False}, indent=2))
    pooling = {"word_embedding_dimension": dim, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
               "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
               "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True,
               "include_prompt": True}
    (path / "1_Pooling").mkdir(exist_ok=True)
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2))
    (path / "2_Normalize").mkdir(exist_ok=True)
    (path / "config_sentence_transformers.json").write_text(json.dumps(
        {"model_type": "SentenceTransformer", "prompts": {}, "default_prompt_name": None,
         "similarity_fn_name": "cosine"}, indent=2))


def save_student(model, tokenizer, path: Union[str, Path], results: Optional[dict] = None,
                 max_seq_length: Optional[int] = None, repo_id: Optional[str] = None) -> Path:
    """Save weights, config, custom code, tokenizer, sentence-transformers files and a model card
    (whose usage examples name `repo_id`, default tf2rnn/<folder name>)."""
    from .modelcard import write_model_card

    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    write_sentence_transformers_files(path, model.config, max_seq_length)
    write_model_card(path, model.config, results, repo_id=repo_id, state_bytes=model.init_state(1).nbytes())
    return path


def push(path: Union[str, Path], repo_id: str, private: bool = False, commit_message: str = "Upload tf2rnn student",
         revision: Optional[str] = None) -> str:
    """Create `repo_id` if needed and upload the saved folder in one commit; returns the commit id.
    Unchanged files are skipped by the client, so re-pushing an unchanged folder makes no new commit."""
    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    info = api.upload_folder(folder_path=str(path), repo_id=repo_id, commit_message=commit_message,
                             revision=revision)
    return info.oid


def pull(repo_id: str, revision: Optional[str] = None, local_dir: Optional[Union[str, Path]] = None) -> Path:
    """Download a student (optionally at `revision`), verify every file's hash, and return its folder."""
    folder = Path(snapshot_download(repo_id, revision=revision, local_dir=local_dir))
    verify_snapshot(folder, repo_id, revision)
    return folder


class CorruptedDownloadError(OSError):
    """A downloaded file's hash differs from the one the Hub lists for it."""


def _git_sha1(path: Path) -> str:
    import hashlib

    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_snapshot(folder: Union[str, Path], repo_id: str, revision: Optional[str] = None) -> None:
    """Check every downloaded file against the hashes in the repo's tree (sha256 for LFS files, the git blob
    hash otherwise); the Hub client itself only checks sizes. Raises CorruptedDownloadError."""
    from huggingface_hub.hf_api import RepoFile

    folder = Path(folder)
    for entry in HfApi().list_repo_tree(repo_id, revision=revision, recursive=True):
        if not isinstance(entry, RepoFile):
            continue
        local = folder / entry.path
        if not local.is_file():
            continue
        expected, actual = (entry.lfs.sha256, _sha256(local)) if entry.lfs else (entry.blob_id, _git_sha1(local))
        if expected != actual:
            real = local.resolve()
            local.unlink()
            if real != local and real.exists():
                real.unlink()  # drop the bad blob from the cache so a retry downloads it again
            raise CorruptedDownloadError(f"{repo_id}/{entry.path} at {revision or 'main'} is corrupted: "
                                         f"expected hash {expected}, downloaded {actual}. Nothing was loaded.")
