"""A small Hugging Face Hub for tests: the part of the Hub's HTTP protocol that `huggingface_hub` uses
(create, validate-yaml, preupload, LFS batch upload, commit, repo/revision info, tree, resolve), over
the standard library, storing repos on disk.

Commits are atomic (the whole commit is checked, then the repo's history is replaced by one rename), a
revision is a branch name or a commit id, and blobs are content-addressed. Faults can be injected for
tests: `refuse_commits` answers 500 to commits, `corrupt(repo, path)` flips bytes of a stored blob.

Run alone: `python tests/hub_server.py ROOT [PORT]`.
"""

import base64
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Optional, Tuple
from urllib.parse import parse_qs, unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".npy", ".h5", ".onnx", ".msgpack", ".zip", ".gz")


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubStore:
    """Repos on disk: blobs/<sha256>, repos/<type>/<ns>/<name>/history.json (a list of commits)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.refuse_commits = False

    def _repo_dir(self, repo_type: str, repo_id: str) -> Path:
        return self.root / "repos" / repo_type / repo_id

    def exists(self, repo_type: str, repo_id: str) -> bool:
        return (self._repo_dir(repo_type, repo_id) / "history.json").is_file()

    def history(self, repo_type: str, repo_id: str) -> list:
        return json.loads((self._repo_dir(repo_type, repo_id) / "history.json").read_text())

    def _write_history(self, repo_type: str, repo_id: str, history: list) -> None:
        folder = self._repo_dir(repo_type, repo_id)
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder)
        with os.fdopen(fd, "w") as f:
            json.dump(history, f)
        os.replace(tmp, folder / "history.json")  # atomic: the new commit is visible whole or not at all

    def create(self, repo_type: str, repo_id: str) -> bool:
        with self.lock:
            if self.exists(repo_type, repo_id):
                return False
            initial = {"oid": hashlib.sha1(f"init {repo_id} {time.time()}".encode()).hexdigest(), "parent": None,
                       "files": {}, "summary": "initial commit", "date": time.time()}
            self._write_history(repo_type, repo_id, [initial])
            return True

    def resolve(self, repo_type: str, repo_id: str, revision: str) -> Optional[dict]:
        history = self.history(repo_type, repo_id)
        if revision in ("main", "HEAD"):
            return history[-1]
        return next((c for c in history if c["oid"] == revision or c["oid"].startswith(revision)), None)

    def blob_path(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256

    def put_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self.blob_path(sha)
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        return sha

    def commit(self, repo_type: str, repo_id: str, revision: str, lines: list) -> Tuple[int, dict]:
        """Apply an ndjson commit; everything is validated before anything is written."""
        with self.lock:
            if self.refuse_commits:
                return 500, {"error": "commits are refused by this test server"}
            head = self.resolve(repo_type, repo_id, revision)
            if head is None or revision not in ("main", "HEAD"):
                return 404, {"error": f"revision {revision} is not a branch"}
            files = dict(head["files"])
            header = {}
            for item in lines:
                key, value = item.get("key"), item.get("value", {})
                if key == "header":
                    header = value
                    if value.get("parentCommit") and value["parentCommit"] != head["oid"]:
                        return 412, {"error": "parentCommit is not the head of the branch"}
                elif key == "file":
                    data = base64.b64decode(value["content"])
                    files[value["path"]] = {"sha256": self.put_blob(data), "size": len(data), "lfs": False,
                                            "git": git_sha1(data)}
                elif key == "lfsFile":
                    if not self.blob_path(value["oid"]).is_file():
                        return 422, {"error": f"LFS object {value['oid']} was never uploaded"}
                    files[value["path"]] = {"sha256": value["oid"], "size": value["size"], "lfs": True}
                elif key == "deletedFile":
                    files.pop(value["path"], None)
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    files = {p: f for p, f in files.items() if not p.startswith(prefix)}
                else:
                    return 400, {"error": f"unknown commit line {key!r}"}
            tree = json.dumps(files, sort_keys=True)
            oid = hashlib.sha1(f"{head['oid']}\n{tree}\n{header.get('summary', '')}".encode()).hexdigest()
            commit = {"oid": oid, "parent": head["oid"], "files": files, "summary": header.get("summary", ""),
                      "date": time.time()}
            self._write_history(repo_type, repo_id, self.history(repo_type, repo_id) + [commit])
            return 200, {"commitOid": oid, "commitUrl": f"/{repo_id}/commit/{oid}", "success": True}

    def corrupt(self, repo_id: str, path: str, repo_type: str = "model") -> None:
        """Flip bytes of the blob behind `path` at the head of main (same size, different content)."""
        entry = self.history(repo_type, repo_id)[-1]["files"][path]
        blob = self.blob_path(entry["sha256"])
        data = bytearray(blob.read_bytes())
        for i in range(len(data) // 2, min(len(data), len(data) // 2 + 16)):
            data[i] ^= 0xFF
        blob.write_bytes(bytes(data))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store: HubStore = None  # set by serve()

    def log_message(self, fmt, *args):  # quiet
        pass

    # ------------------------------------------------------------ plumbing

    def _body(self) -> bytes:
        # Always read the body, even on routes we reject: with keep-alive, unread bytes poison the next request.
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload=None, headers: Optional[Dict[str, str]] = None, body: Optional[bytes] = None,
              head_only: bool = False) -> None:
        data = body if body is not None else (json.dumps(payload).encode() if payload is not None else b"")
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if body is None else "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head_only:
            self.wfile.write(data)

    def _error(self, status: int, code: str, message: str, head_only: bool = False) -> None:
        self._send(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message}, head_only=head_only)

    @staticmethod
    def _split_type(path: str) -> Tuple[str, str]:
        for prefix, kind in (("datasets/", "dataset"), ("spaces/", "space")):
            if path.startswith(prefix):
                return kind, path[len(prefix):]
        return "model", path

    # ------------------------------------------------------------ routes

    def do_POST(self):
        body = self._body()
        url = urlparse(self.path)
        path = unquote(url.path)
        store = self.store
        if path == "/api/repos/create":
            req = json.loads(body or b"{}")
            repo_id = f"{req['organization']}/{req['name']}" if req.get("organization") else req["name"]
            kind = req.get("type") or "model"
            url_ = f"http://{self.headers['Host']}/{'' if kind == 'model' else kind + 's/'}{repo_id}"
            created = store.create(kind, repo_id)
            return self._send(200 if created else 409, {"url": url_, "name": repo_id} if created else
                              {"url": url_, "error": "You already created this model repo"})
        if path == "/api/validate-yaml":
            req = json.loads(body or b"{}")
            try:
                import yaml

                meta = yaml.safe_load(req.get("content") or "")
                errors = [] if isinstance(meta, (dict, type(None))) else [{"message": "metadata must be a mapping"}]
            except Exception as err:  # a YAML syntax error is the client's error to see
                errors = [{"message": str(err)}]
            return self._send(200, {"errors": errors, "warnings": []})
        m = re.fullmatch(r"/api/(models|datasets|spaces)/(.+)/preupload/([^/]+)", path)
        if m:
            kind, repo_id, rev = m.group(1)[:-1], m.group(2), m.group(3)
            if not store.exists(kind, repo_id):
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            head = store.resolve(kind, repo_id, rev) or {"files": {}}
            out = []
            for f in json.loads(body)["files"]:
                sample = base64.b64decode(f["sample"])
                lfs = f["path"].endswith(LFS_SUFFIXES) or f["size"] >= 10_000_000 or b"\0" in sample
                known = head["files"].get(f["path"])
                oid = None
                if known is not None and known["lfs"] == lfs:
                    oid = known["sha256"] if lfs else known.get("git")
                out.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                            "oid": oid})
            return self._send(200, {"files": out, "commitOid": head.get("oid")})
        m = re.fullmatch(r"/(.+)\.git/info/lfs/objects/batch", path)
        if m:
            host = self.headers["Host"]
            objects = []
            for obj in json.loads(body)["objects"]:
                entry = {"oid": obj["oid"], "size": obj["size"]}
                if not store.blob_path(obj["oid"]).is_file():
                    entry["actions"] = {"upload": {"href": f"http://{host}/lfs-upload/{obj['oid']}"}}
                objects.append(entry)
            return self._send(200, {"transfer": "basic", "objects": objects})
        m = re.fullmatch(r"/api/(models|datasets|spaces)/(.+)/commit/([^/]+)", path)
        if m:
            kind, repo_id, rev = m.group(1)[:-1], m.group(2), m.group(3)
            if not store.exists(kind, repo_id):
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found")
            lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
            status, payload = store.commit(kind, repo_id, rev, lines)
            return self._send(status, payload)
        return self._error(404, "EntryNotFound", f"no route for POST {path}")

    def do_PUT(self):
        body = self._body()
        m = re.fullmatch(r"/lfs-upload/([0-9a-f]{64})", urlparse(self.path).path)
        if not m:
            return self._error(404, "EntryNotFound", "no route")
        if hashlib.sha256(body).hexdigest() != m.group(1):
            return self._send(400, {"error": "sha256 of the uploaded bytes does not match the object id"})
        self.store.put_blob(body)
        return self._send(200, {})

    def do_HEAD(self):
        self._get(head_only=True)

    def do_GET(self):
        self._get(head_only=False)

    def _get(self, head_only: bool):
        self._body()
        url = urlparse(self.path)
        path = unquote(url.path)
        store = self.store
        m = re.fullmatch(r"/api/(models|datasets|spaces)/([^/]+/[^/]+|[^/]+)(?:/revision/([^/]+))?", path)
        if m:
            kind, repo_id, rev = m.group(1)[:-1], m.group(2), m.group(3) or "main"
            if not store.exists(kind, repo_id):
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found", head_only)
            commit = store.resolve(kind, repo_id, rev)
            if commit is None:
                return self._error(404, "RevisionNotFound", f"Revision {rev} not found", head_only)
            info = {"id": repo_id, "modelId": repo_id, "sha": commit["oid"], "private": False,
                    "lastModified": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(commit["date"])),
                    "siblings": [{"rfilename": p, "size": f["size"]} for p, f in sorted(commit["files"].items())],
                    "tags": [], "downloads": 0, "likes": 0}
            return self._send(200, info, head_only=head_only)
        m = re.fullmatch(r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", path)
        if m:
            kind, repo_id, rev, sub = m.group(1)[:-1], m.group(2), m.group(3), (m.group(4) or "").strip("/")
            if not store.exists(kind, repo_id):
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found", head_only)
            commit = store.resolve(kind, repo_id, rev)
            if commit is None:
                return self._error(404, "RevisionNotFound", f"Revision {rev} not found", head_only)
            recursive = parse_qs(url.query).get("recursive", ["false"])[0].lower() == "true"
            return self._send(200, self._tree(commit, sub, recursive), head_only=head_only)
        m = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        if m:
            kind, repo_id = self._split_type(m.group(1))
            rev, filename = m.group(2), m.group(3)
            if not store.exists(kind, repo_id):
                return self._error(404, "RepoNotFound", f"Repository {repo_id} not found", head_only)
            commit = store.resolve(kind, repo_id, rev)
            if commit is None:
                return self._error(404, "RevisionNotFound", f"Revision {rev} not found", head_only)
            entry = commit["files"].get(filename)
            if entry is None:
                return self._error(404, "EntryNotFound", f"{filename} not found at {rev}", head_only)
            data = store.blob_path(entry["sha256"]).read_bytes()
            headers = {"X-Repo-Commit": commit["oid"], "ETag": f'"{entry["sha256"] if entry["lfs"] else entry["git"]}"',
                       "Accept-Ranges": "bytes"}
            if entry["lfs"]:
                headers.update({"X-Linked-Etag": f'"{entry["sha256"]}"', "X-Linked-Size": str(entry["size"])})
            return self._send(200, headers=headers, body=data, head_only=head_only)
        return self._error(404, "EntryNotFound", f"no route for GET {path}", head_only)

    @staticmethod
    def _tree(commit: dict, sub: str, recursive: bool) -> list:
        prefix = f"{sub}/" if sub else ""
        entries, folders = [], set()
        for p, f in sorted(commit["files"].items()):
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix):]
            if "/" in rest and not recursive:
                folders.add(prefix + rest.split("/")[0])
                continue
            if "/" in rest:
                parts = rest.split("/")
                for i in range(1, len(parts)):
                    folders.add(prefix + "/".join(parts[:i]))
            entry = {"type": "file", "path": p, "size": f["size"], "oid": f.get("git") or f["sha256"]}
            if f["lfs"]:
                entry["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": 134}
            entries.append(entry)
        return [{"type": "directory", "path": d, "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0}
                for d in sorted(folders)] + entries


def serve(root: Path, port: int = 0) -> Tuple[ThreadingHTTPServer, HubStore, threading.Thread]:
    """Start the server on 127.0.0.1 (a free port when 0) in a daemon thread."""
    store = HubStore(root)
    handler = type("BoundHandler", (Handler,), {"store": store})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, store, thread


if __name__ == "__main__":
    srv, _, t = serve(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    print(f"http://127.0.0.1:{srv.server_address[1]}", flush=True)
    t.join()
