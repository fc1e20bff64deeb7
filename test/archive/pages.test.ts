import { describe, expect, it } from "vitest";
import { Archiver, type ArchiverOptions } from "../../src/archive/pipeline.js";
import type { Logger } from "../../src/core/log.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} } as unknown as Logger;

/** Only the page bookkeeping is used here: no writer, no dedup. */
function archiver(): Archiver {
  return new Archiver({ log: quiet } as unknown as ArchiverOptions);
}

/** Whether `p` settles within `ms`. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void p.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, ms));
  return settled;
}

describe("pages in progress", () => {
  it("holds a wait for a page until each of its captures ends, and only for that page", async () => {
    const a = archiver();
    const first = a.expectPage("s", "http://a/");
    const second = a.expectPage("s", "http://a/");
    const other = a.expectPage("s", "http://b/");
    const otherSeries = a.expectPage("t", "http://a/");
    const wait = a.awaitPageRecord("s", "http://a/", 60_000, 10_000);
    expect(await settlesWithin(wait, 20)).toBe(false);
    first();
    first(); // ending twice is harmless
    expect(await settlesWithin(wait, 20)).toBe(false);
    second();
    expect(await settlesWithin(wait, 20)).toBe(true);
    expect(await wait).toBeNull(); // nothing was written
    other();
    otherSeries();
  });

  it("does not wait when no capture of the page is in progress", async () => {
    const a = archiver();
    a.expectPage("s", "http://b/");
    const ended = a.expectPage("s", "http://a/");
    ended();
    expect(await settlesWithin(a.awaitPageRecord("s", "http://a/", 60_000, 10_000), 20)).toBe(true);
  });

  it("gives up waiting after waitMs", async () => {
    const a = archiver();
    a.expectPage("s", "http://a/");
    expect(await settlesWithin(a.awaitPageRecord("s", "http://a/", 60_000, 10), 200)).toBe(true);
  });
});
