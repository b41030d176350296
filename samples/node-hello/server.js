// node-hello is a sample app for svc: a web server on Node's http module
// that says hello, reports its health, and can be told to fail.
//
//   GET  /           hello from node, and $GREETING
//   GET  /healthz    200, or 500 once /break was called
//   GET  /env/NAME   the value of the environment variable NAME
//   POST /break      /healthz answers 500 from then on (until the process ends)
//   POST /crash      writes crash-forever in the working directory and exits 1;
//                    while that file is there the app exits at start
//
// It listens on $PORT (8080 when unset) on every interface and logs one
// line per request to stdout.
'use strict';

const fs = require('fs');
const http = require('http');

const marker = 'crash-forever';

if (fs.existsSync(marker)) {
  console.log(`node-hello: ${marker} exists: exiting at once (a fresh deploy clears it)`);
  process.exit(1);
}

const port = Number(process.env.PORT || 8080);
let broken = false;

function send(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body);
}

const server = http.createServer((req, res) => {
  console.log(`node-hello: ${req.method} ${req.url} from ${req.socket.remoteAddress}`);
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path === '/') {
    return send(res, 200, `hello from node: ${process.env.GREETING || ''}\n`);
  }
  if (req.method === 'GET' && path === '/healthz') {
    return broken ? send(res, 500, 'broken\n') : send(res, 200, 'ok\n');
  }
  if (req.method === 'GET' && path.startsWith('/env/')) {
    const name = decodeURIComponent(path.slice('/env/'.length));
    if (!Object.prototype.hasOwnProperty.call(process.env, name)) {
      return send(res, 404, 'not set\n');
    }
    return send(res, 200, process.env[name]);
  }
  if (req.method === 'POST' && path === '/break') {
    broken = true;
    return send(res, 200, 'broken: /healthz answers 500 from now on\n');
  }
  if (req.method === 'POST' && path === '/crash') {
    fs.writeFileSync(marker, 'written by POST /crash\n');
    console.log('node-hello: POST /crash: exiting with code 1');
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
    return res.end('crashing\n', () => process.exit(1));
  }
  send(res, 404, 'not found\n');
});

server.listen(port, () => {
  console.log(`node-hello: listening on port ${port}`);
});
