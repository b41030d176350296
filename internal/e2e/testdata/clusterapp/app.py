"""clusterapp is the app the cluster-mode end-to-end test deploys: it
answers GET /echo with a JSON object of the request's headers and of the
environment variables it was asked for (?env=NAME, repeatable), and GET
/healthz with 200. It listens on $PORT on every interface.
"""

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *args):
        pass

    def send(self, status, body, ctype="text/plain; charset=utf-8"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        u = urlsplit(self.path)
        if u.path.endswith("/healthz"):
            self.send(200, "ok\n")
            return
        if u.path.endswith("/echo"):
            names = parse_qs(u.query).get("env", [])
            out = {
                "app": "clusterapp",
                "headers": {k: v for k, v in self.headers.items()},
                "env": {n: os.environ.get(n) for n in names},
            }
            self.send(200, json.dumps(out), "application/json")
            return
        self.send(200, "clusterapp\n")


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "8080"))
    print(f"clusterapp: listening on {port}", flush=True)
    ThreadingHTTPServer(("", port), Handler).serve_forever()
