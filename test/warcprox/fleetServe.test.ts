/** Two `lathe serve` processes sharing one PostgreSQL: a Warcprox-Meta limit is exact for the fleet. Needs dist/ (npm run build). */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startHttpOrigin, type Origin } from "../helpers/origin.js";
import { rawExchange, viaProxy } from "../helpers/client.js";
import { ADMIN_PASSWORD, startPostgres, type PostgresServer } from "../helpers/postgres.js";
import { registerInstances } from "../helpers/fleet.js";
import { type Served, startServe } from "../helpers/serve.js";

/** `lathe serve --postgresql URL` as instance `id` (set in its settings file), on ephemeral ports. */
function serve(url: string, id: string): Promise<Served> {
  const dir = mkdtempSync(join(tmpdir(), "lathe-fleet-"));
  const config = join(dir, "proxy.config.json");
  writeFileSync(config, JSON.stringify({ shared: { instanceId: id } }));
  return startServe(["--postgresql", url, "--port", "0", "--dir", join(dir, "warcs"), "--certs", join(dir, "certs"), "--config", config]);
}

let server: PostgresServer;
let origin: Origin;
const served: Served[] = [];

beforeAll(async () => {
  server = await startPostgres();
  origin = await startHttpOrigin();
});
afterAll(async () => {
  for (const s of served) s.proc.kill("SIGKILL");
  await origin?.close();
  server?.destroy();
});

describe("two lathe serve processes sharing one PostgreSQL", () => {
  it("a limit of 10 under 2 × 16 concurrent clients split across them: exactly 10 pass, the rest get 420 with the Warcprox-Meta answer", async () => {
    const url = await server.createDatabase();
    const [a, b] = await Promise.all([serve(url, "serve-a"), serve(url, "serve-b")]);
    served.push(a, b);
    await registerInstances(server, new URL(url).pathname.slice(1), ["serve-a", "serve-b"]);
    const meta = JSON.stringify({ stats: { buckets: ["cli-job"] }, limits: { "cli-job/total/urls": 10 } });
    const results = await Promise.all(
      Array.from({ length: 32 }, (_, i) => viaProxy((i % 2 ? a : b).proxyUrl, `${origin.url}/slow/4?i=${i}`, { headers: { Host: "x", "Warcprox-Meta": meta }, agent: new http.Agent() })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    const limited = results.filter((r) => r.status === 420);
    expect(limited).toHaveLength(22);
    for (const r of limited) {
      expect(r.body.toString()).toBe("request rejected by warcprox: reached limit cli-job/total/urls=10\n");
      const h = JSON.parse(r.rawHeaders[r.rawHeaders.findIndex((x) => x.toLowerCase() === "warcprox-meta") + 1]!);
      expect(h["reached-limit"]).toEqual({ "cli-job/total/urls": 10 });
      expect(h.stats["cli-job"].total.urls).toBe(10);
    }
    for (const s of [a, b]) {
      const raw = await rawExchange(s.proxyUrl, "GET /lathe/stats/cli-job HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n");
      expect(JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4))).toMatchObject({ bucket: "cli-job", total: { urls: 10 } });
    }
    for (const s of [a, b]) {
      const exited = new Promise<number | null>((res) => s.proc.on("exit", (c) => res(c)));
      s.proc.kill("SIGTERM");
      expect(await exited, s.out()).toBe(0);
    }
    for (const s of [a, b]) expect(s.out()).not.toContain(ADMIN_PASSWORD);
  });
});
