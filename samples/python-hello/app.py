"""python-hello is a sample app for svc: a web server on the standard
library's http.server that says hello, reports its health, and can be told
to fail.

    GET  /           hello from python, and $GREETING
    GET  /healthz    200, or 500 once /break was called
    GET  /env/NAME   the value of the environment variable NAME
    POST /break      /healthz answers 500 from then on (until the process ends)
    POST /crash      writes crash-forever in the working directory and exits 1;
                     while that file is there the app exits at start

It listens on $PORT (8080 when unset) on every interface and logs one line
per request to stdout.
"""

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

MARKER = "crash-forever"
broken = False


def log(line):
    print(line, flush=True)


class Handler(BaseHTTPRequestHandler):
    def send_text(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def log_message(self, format, *args):
        pass  # one line per request is logged by route below

    def route(self):
        log(f"python-hello: {self.command} {self.path} from {self.client_address[0]}")
        return self.path.split("?", 1)[0]

    def do_GET(self):
        path = self.route()
        if path == "/":
            self.send_text(200, f"hello from python: {os.environ.get('GREETING', '')}\n")
        elif path == "/healthz":
            if broken:
                self.send_text(500, "broken\n")
            else:
                self.send_text(200, "ok\n")
        elif path.startswith("/env/"):
            name = unquote(path[len("/env/"):])
            if name in os.environ:
                self.send_text(200, os.environ[name])
            else:
                self.send_text(404, "not set\n")
        else:
            self.send_text(404, "not found\n")

    def do_POST(self):
        global broken
        path = self.route()
        if path == "/break":
            broken = True
            self.send_text(200, "broken: /healthz answers 500 from now on\n")
        elif path == "/crash":
            with open(MARKER, "w") as f:
                f.write("written by POST /crash\n")
            self.send_text(200, "crashing\n")
            log("python-hello: POST /crash: exiting with code 1")
            os._exit(1)
        else:
            self.send_text(404, "not found\n")


def main():
    if os.path.exists(MARKER):
        log(f"python-hello: {MARKER} exists: exiting at once (a fresh deploy clears it)")
        sys.exit(1)
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    log(f"python-hello: listening on port {port}")
    server.serve_forever()


if __name__ == "__main__":
    main()
