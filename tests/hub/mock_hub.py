#!/usr/bin/env python3
"""A small stand-in for the Hugging Face Hub, for the hub end-to-end test (hub_e2e.py).

Serves the routes splash (and huggingface_hub) use, on 127.0.0.1 with an ephemeral port:
  GET  /api/models/{owner}/{name}[/revision/{rev}]   {"sha", "siblings": [{"rfilename"}], ...}
  HEAD|GET /{owner}/{name}/resolve/{rev}/{path}       small files: 200 with ETag = git blob sha1;
                                                      LFS files (.gguf, .safetensors): 302 to /cdn/...
                                                      with X-Linked-Etag, X-Linked-Size, X-Repo-Commit
  GET  /cdn/{owner}/{name}/{sha256}                   the bytes; Range: bytes=a-[b] answers 206
Errors as the Hub answers them: 404 + X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound,
401 + X-Error-Code GatedRepo for a gated repository without the right Bearer token.

Test controls (attributes of MockHub, safe to change between runs):
  drops      list of byte counts: the n-th CDN GET closes the connection after drops[n] body bytes
  chunk_delay seconds slept per 16 KiB chunk of CDN bodies (slow downloads: the lock test)
  served     {(repo, path, "probe" | "download"): body bytes sent}; requests: list of (method, path)

Standalone: python3 mock_hub.py DIR [--port N] serves every DIR/owner/name folder as a repository.
"""
import hashlib
import http.server
import json
import os
import sys
import threading
import time
import urllib.parse

LFS_SUFFIXES = (".gguf", ".safetensors", ".bin")


class Repo:
    def __init__(self, files, gated=False, revision="main"):
        self.files = dict(files)  # path -> bytes
        self.gated = gated
        # A deterministic commit id from the contents, as a real repository's would change with them.
        h = hashlib.sha1()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        self.commit = h.hexdigest()
        self.revisions = {revision: self.commit, self.commit: self.commit}


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class MockHub:
    def __init__(self, token="hf_mock_token_4f7a1c"):
        self.repos = {}
        self.token = token
        self.drops = []
        self.chunk_delay = 0.0
        self.corrupt = set()  # repo ids whose CDN downloads (not header probes) arrive with one byte flipped
        self.served = {}
        self.requests = []
        self.lock = threading.Lock()
        self.blobs = {}  # repo -> {sha256: path}
        self.server = None

    def add_repo(self, repo_id, files, gated=False):
        repo = Repo(files, gated)
        self.repos[repo_id] = repo
        self.blobs[repo_id] = {hashlib.sha256(data).hexdigest(): path for path, data in repo.files.items()}
        return repo

    def bytes_served(self, repo=None, suffixes=None, kind=None):
        """Body bytes sent; kind "probe" (a closed range, bytes=a-b: header reads) or "download"."""
        with self.lock:
            return sum(n for (r, p, k), n in self.served.items()
                       if (repo is None or r == repo) and (suffixes is None or p.endswith(suffixes))
                       and (kind is None or k == kind))

    def start(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.handle_any(head=True)

            def do_GET(self):
                self.handle_any(head=False)

            # --- helpers
            def reply(self, status, headers=None, body=b"", head=False):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def error(self, status, code, head):
                self.reply(status, {"X-Error-Code": code, "X-Error-Message": code,
                                    "Content-Type": "application/json"},
                           json.dumps({"error": code}).encode(), head)

            def authorized(self, repo):
                if not repo.gated:
                    return True
                return self.headers.get("Authorization", "") == "Bearer " + hub.token

            def handle_any(self, head):
                with hub.lock:
                    hub.requests.append(("HEAD" if head else "GET", self.path))
                path = urllib.parse.urlsplit(self.path).path
                parts = [urllib.parse.unquote(p) for p in path.split("/")[1:]]
                if parts[:2] == ["api", "models"] and len(parts) >= 4:
                    return self.api_model(parts[2] + "/" + parts[3], parts[5] if len(parts) >= 6 else "main", head)
                if parts[:1] == ["cdn"] and len(parts) == 4:
                    return self.cdn(parts[1] + "/" + parts[2], parts[3], head)
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self.resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), head)
                self.error(404, "NotFound", head)

            def api_model(self, repo_id, rev, head):
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self.error(404, "RepoNotFound", head)
                if not self.authorized(repo):
                    return self.error(401, "GatedRepo", head)
                if rev not in repo.revisions:
                    return self.error(404, "RevisionNotFound", head)
                body = json.dumps({"id": repo_id, "sha": repo.revisions[rev], "gated": "auto" if repo.gated else False,
                                   "siblings": [{"rfilename": f} for f in sorted(repo.files)]}).encode()
                self.reply(200, {"Content-Type": "application/json"}, body, head)

            def resolve(self, repo_id, rev, file, head):
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self.error(404, "RepoNotFound", head)
                if not self.authorized(repo):
                    return self.error(401, "GatedRepo", head)
                if rev not in repo.revisions:
                    return self.error(404, "RevisionNotFound", head)
                data = repo.files.get(file)
                if data is None:
                    return self.error(404, "EntryNotFound", head)
                commit = repo.revisions[rev]
                if file.endswith(LFS_SUFFIXES):
                    sha = hashlib.sha256(data).hexdigest()
                    return self.reply(302, {"Location": "/cdn/%s/%s" % (repo_id, sha), "X-Repo-Commit": commit,
                                            "X-Linked-Etag": '"%s"' % sha, "X-Linked-Size": str(len(data)),
                                            "ETag": '"%s"' % git_blob_sha1(b"lfs pointer " + sha.encode())}, b"", head)
                headers = {"X-Repo-Commit": commit, "ETag": '"%s"' % git_blob_sha1(data)}
                if not head:
                    with hub.lock:
                        key = (repo_id, file, "download")
                        hub.served[key] = hub.served.get(key, 0) + len(data)
                self.reply(200, headers, data, head)

            def cdn(self, repo_id, sha, head):
                file = hub.blobs.get(repo_id, {}).get(sha)
                if file is None:
                    return self.error(404, "NotFound", head)
                data = hub.repos[repo_id].files[file]
                start, end = 0, len(data)
                status = 200
                rng = self.headers.get("Range")
                kind = "probe" if rng and not rng.endswith("-") else "download"
                headers = {"Accept-Ranges": "bytes", "ETag": '"%s"' % sha}
                if rng and rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    start = int(a)
                    end = min(len(data), int(b) + 1) if b else len(data)
                    if start >= len(data):
                        return self.reply(416, {"Content-Range": "bytes */%d" % len(data)}, b"", head)
                    status = 206
                    headers["Content-Range"] = "bytes %d-%d/%d" % (start, end - 1, len(data))
                body = data[start:end]
                if kind == "download" and repo_id in hub.corrupt and body:
                    mid = len(body) // 2
                    body = body[:mid] + bytes([body[mid] ^ 0x5A]) + body[mid + 1:]
                drop = None
                if not head:
                    with hub.lock:
                        if hub.drops:
                            drop = hub.drops.pop(0)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if head:
                    return
                sent = 0
                while sent < len(body):
                    n = min(16384, len(body) - sent)
                    if drop is not None:
                        n = min(n, drop - sent)
                        if n <= 0:
                            break
                    self.wfile.write(body[sent:sent + n])
                    sent += n
                    with hub.lock:
                        hub.served[(repo_id, file, kind)] = hub.served.get((repo_id, file, kind), 0) + n
                    if hub.chunk_delay:
                        self.wfile.flush()
                        time.sleep(hub.chunk_delay)
                if drop is not None and sent < len(body):
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    hub = MockHub()
    for owner in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, owner))):
            d = os.path.join(root, owner, name)
            files = {}
            for dirpath, _, names in os.walk(d):
                for n in names:
                    p = os.path.join(dirpath, n)
                    files[os.path.relpath(p, d)] = open(p, "rb").read()
            hub.add_repo(owner + "/" + name, files)
    url = hub.start()
    print("mock hub at", url, "token", hub.token, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
