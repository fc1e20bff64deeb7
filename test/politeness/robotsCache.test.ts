/**
 * robots.txt expiry (RFC 9309 §2.3.1, §2.4) on a clock the test moves: one fetch however many
 * ask at once; 2xx and 4xx kept a day; 5xx and unreachable disallow everything and are asked
 * again after the retry period, while an earlier good copy stays in use; what the fetch throws
 * (the turn never came) is not cached.
 */
import { describe, expect, it } from "vitest";
import { RobotsCache, type RobotsResponse } from "../../src/politeness/robotsCache.js";

const URL_ = "http://site.test/robots.txt";

function setup() {
  let now = 1_000_000;
  const cache = new RobotsCache({ now: () => now, cacheMs: 86_400_000, retryMs: 300_000 });
  const answers: RobotsResponse[] = [];
  let fetches = 0;
  const fetch = async () => {
    fetches++;
    return answers.shift() ?? { kind: "unreachable" as const, error: "no answer scripted" };
  };
  return { cache, answers, fetch, fetches: () => fetches, advance: (ms: number) => (now += ms) };
}

describe("the robots.txt cache", () => {
  it("fetches once for concurrent askers and keeps a 200 for 24 hours", async () => {
    const t = setup();
    t.answers.push({ kind: "response", status: 200, body: "User-agent: *\nDisallow: /x\n" });
    const [a, b] = await Promise.all([t.cache.get(URL_, t.fetch), t.cache.get(URL_, t.fetch)]);
    expect(a).toBe(b);
    expect(t.fetches()).toBe(1);
    t.advance(86_400_000 - 1);
    expect((await t.cache.get(URL_, t.fetch)).state.kind).toBe("rules");
    expect(t.fetches()).toBe(1);
    t.advance(1);
    t.answers.push({ kind: "response", status: 404, body: "" });
    expect((await t.cache.get(URL_, t.fetch)).state).toEqual({ kind: "allow-all", status: 404 });
    expect(t.fetches()).toBe(2);
  });

  it("disallows everything while robots.txt answers 5xx or 429 or cannot be reached, and asks again after the retry period", async () => {
    const t = setup();
    t.answers.push({ kind: "response", status: 503, body: "" });
    expect((await t.cache.get(URL_, t.fetch)).state).toMatchObject({ kind: "disallow-all", why: "robots.txt answered 503" });
    t.advance(299_999);
    await t.cache.get(URL_, t.fetch);
    expect(t.fetches()).toBe(1);
    t.advance(1);
    t.answers.push({ kind: "response", status: 429, body: "" });
    expect((await t.cache.get(URL_, t.fetch)).state.kind).toBe("disallow-all");
    t.advance(300_000);
    t.answers.push({ kind: "response", status: 200, body: "User-agent: *\nAllow: /\n" });
    expect((await t.cache.get(URL_, t.fetch)).state.kind).toBe("rules");
    expect(t.fetches()).toBe(3);
  });

  it("keeps using a good copy while the site has trouble, retrying after the retry period", async () => {
    const t = setup();
    t.answers.push({ kind: "response", status: 200, body: "User-agent: *\nDisallow: /private\n" });
    await t.cache.get(URL_, t.fetch);
    t.advance(86_400_000);
    t.answers.push({ kind: "unreachable", error: "connect ECONNREFUSED" });
    const e = await t.cache.get(URL_, t.fetch);
    expect(e.state.kind).toBe("rules");
    expect(e.expiresAtMs - (1_000_000 + 86_400_000)).toBe(300_000);
  });

  it("does not cache what the fetch throws", async () => {
    const t = setup();
    await expect(Promise.resolve(t.cache.get(URL_, () => Promise.reject(new Error("no turn"))))).rejects.toThrow("no turn");
    t.answers.push({ kind: "response", status: 200, body: "" });
    expect((await t.cache.get(URL_, t.fetch)).state.kind).toBe("rules");
  });
});
