"""Pushing a saved student to the Hub and pulling one back, with every downloaded file checked against
the hashes the Hub lists."""

from pathlib import Path
from typing import Optional, Union

from huggingface_hub import HfApi, snapshot_download


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
