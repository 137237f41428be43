// A minimal MCP endpoint over HTTP/2 only (TLS, ALPN `h2`, no HTTP/1.1 fallback), for
// toolgate's remote-server tests (crates/toolgate/tests/remote_servers.rs): it proves that
// `toolgate wrap --url` speaks h2 where the server offers it.
//
//   node tests/remote/h2-server.mjs CERT_DIR
//
// CERT_DIR holds server.pem and server.key (made by `python_server.py --tls DIR
// --certs-only`). Prints the port it listens on (127.0.0.1) as its first line. Answers
// `initialize` with a server name that records the negotiated protocol (`h2-h2`), 202 to
// notifications, an empty result to any other request, 405 to anything but POST.
import http2 from 'node:http2';
import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
const server = http2.createSecureServer({
  key: fs.readFileSync(path.join(dir, 'server.key')),
  cert: fs.readFileSync(path.join(dir, 'server.pem')),
  allowHTTP1: false,
});
server.on('stream', (stream, headers) => {
  let body = '';
  stream.on('data', (chunk) => (body += chunk));
  stream.on('end', () => {
    if (headers[':method'] !== 'POST') {
      stream.respond({ ':status': 405 });
      stream.end();
      return;
    }
    let msg;
    try {
      msg = JSON.parse(body);
    } catch {
      stream.respond({ ':status': 400 });
      stream.end();
      return;
    }
    if (msg.id === undefined) {
      stream.respond({ ':status': 202 });
      stream.end();
      return;
    }
    const result =
      msg.method === 'initialize'
        ? {
            protocolVersion: msg.params?.protocolVersion ?? '2025-11-25',
            capabilities: { tools: {} },
            serverInfo: { name: `h2-${stream.session.alpnProtocol}`, version: '0' },
          }
        : {};
    stream.respond({ ':status': 200, 'content-type': 'application/json' });
    stream.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
  });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
