/** The SQLite DedupIndex: adds of one event-loop turn share one transaction, and no call reads around them. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SqliteDedupIndex } from "../../src/dedup/sqliteIndex.js";
import { openSqliteDedupStore } from "../../src/dedup/sqliteStore.js";
import type { DedupEntry } from "../../src/dedup/types.js";
import { entryFor } from "./fixtures/killEntries.mjs";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function openIndex(path = dbPath()): SqliteDedupIndex {
  return new SqliteDedupIndex(openSqliteDedupStore(path));
}
function dbPath(): string {
  const d = mkdtempSync(join(tmpdir(), "lathe-dedup-index-"));
  dirs.push(d);
  return join(d, "lathe-dedup.sqlite3");
}
const entry = (i: number): DedupEntry => ({ ...(entryFor(i) as DedupEntry), bucket: "default", filename: "a.warc.gz", offset: i * 1000 });

describe("SqliteDedupIndex", () => {
  it("stores the adds of one turn in one transaction, each add resolving once it is stored", async () => {
    const index = openIndex();
    const adds = [index.add([entry(1)]), index.add([entry(2), entry(3)]), index.add([entry(4)])];
    await Promise.all(adds);
    expect(index.commits).toBe(1);
    expect(index.count()).toBe(4);
    await index.add([entry(5)]);
    expect(index.commits).toBe(2);
    for (const i of [1, 2, 3, 4, 5]) expect((await index.byDigest("default", entry(i).digest))?.url).toBe(entry(i).url);
    await index.close();
  });

  it("a lookup, a count or a tail removal right after an add sees it", async () => {
    const index = openIndex();
    const added = index.add([entry(1), entry(2)]);
    expect((await index.byUrlAndDigest("default", entry(1).url, entry(1).digest))?.offset).toBe(1000);
    void index.add([entry(3)]);
    expect(index.count()).toBe(3);
    void index.add([entry(4)]);
    // Recovery cuts a file's tail: an entry added before must not come back after it.
    expect(await index.removeFileTail("a.warc.gz", 2000)).toBe(3);
    await added;
    expect(index.count()).toBe(1);
    expect(await index.byUrl("default", entry(1).url, 10)).toHaveLength(1);
    await index.close();
  });

  it("a bad entry fails only its own add; the others of its turn are stored", async () => {
    const index = openIndex();
    const good = index.add([entry(1)]);
    const bad = index.add([{ ...entry(2), bucket: "" }]);
    const alsoGood = index.add([entry(3)]);
    await expect(bad).rejects.toThrow(/bucket must be a non-empty string/);
    await Promise.all([good, alsoGood]);
    expect(index.count()).toBe(2);
    await index.close();
  });

  it("close stores what is waiting", async () => {
    const path = dbPath();
    const index = openIndex(path);
    const added = index.add([entry(1)]);
    await index.close();
    await added;
    const again = openIndex(path);
    expect(again.count()).toBe(1);
    await again.close();
  });
});
