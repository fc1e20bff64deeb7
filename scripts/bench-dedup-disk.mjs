// Dedup disk bar (issue "Deduplication", decisions.md §8): 1,000 plain-HTTP fetches of one 1 MB
// random payload under different URLs, curl-like minimal request headers, default settings, must
// produce WARC files smaller than 2 MB in total. Bounded: 1,000 requests, 120 s at most.
import http from "node:http";
import net from "node:net";
import { mkdtempSync, readdirSync, statSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startLathe } from "../dist/main.js";
import { resolveConfig } from "../dist/config/validate.js";
import { silentLogger } from "../dist/core/log.js";

const N = Number(process.argv.find((a) => a.startsWith("--count="))?.slice(8) ?? 1000);
const payload = randomBytes(1_000_000);
const origin = http.createServer((req, res) => {
  res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": payload.length });
  res.end(payload);
});
await new Promise((r) => origin.listen(0, "127.0.0.1", r));
const oport = origin.address().port;
const dir = mkdtempSync(join(tmpdir(), "lathe-bench-disk-"));
const lathe = await startLathe(resolveConfig({ proxy: { port: 0 }, control: { port: -1 }, warc: { dir: join(dir, "warcs") }, certs: { dir: join(dir, "certs") } }), { log: silentLogger });

// One keep-alive connection, requests written like curl's: request line, Host, User-Agent, Accept.
function fetchOnce(sock, i) {
  return new Promise((resolve, reject) => {
    let got = 0;
    let headEnd = -1;
    let head = Buffer.alloc(0);
    const onData = (d) => {
      if (headEnd < 0) {
        head = Buffer.concat([head, d]);
        headEnd = head.indexOf("\r\n\r\n");
        if (headEnd < 0) return;
        got = head.length - headEnd - 4;
      } else got += d.length;
      if (got >= payload.length) {
        sock.off("data", onData);
        resolve();
      }
    };
    sock.on("data", onData);
    sock.errorHandler = reject;
    sock.write(`GET http://127.0.0.1:${oport}/file/${i} HTTP/1.1\r\nHost: 127.0.0.1:${oport}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n`);
  });
}
const deadline = Date.now() + 120_000;
const sock = net.connect(lathe.address.port, "127.0.0.1");
await new Promise((r) => sock.once("connect", r));
sock.on("error", (e) => sock.errorHandler?.(e));
let done = 0;
for (; done < N && Date.now() < deadline; done++) await fetchOnce(sock, done);
sock.destroy();
await lathe.stop();
origin.close();
const wdir = join(dir, "warcs");
const total = readdirSync(wdir).filter((f) => /\.warc(\.gz)?$/.test(f)).reduce((n, f) => n + statSync(join(wdir, f)).size, 0);
console.log(`dedup disk: ${done} fetches of one 1 MB payload under different URLs → ${(total / 1e6).toFixed(3)} MB of WARCs (revisits: ${lathe.archiver.stats.revisits})`);
console.log(`${done === N && total < 2_000_000 ? "PASS" : "FAIL"}  dedup disk: WARC bytes ${total} (goal < 2,000,000 for ${N} fetches)`);
rmSync(dir, { recursive: true, force: true });
