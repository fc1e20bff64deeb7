/**
 * The writer's append queue on its own: call order, which ready writes join a write's append,
 * where other tasks cut batches, and how a batch's outcome reaches each of its writes.
 */
import { describe, expect, it } from "vitest";
import { AppendQueue, type Append, type Pending } from "../../src/warc/appendQueue.js";

const ready = (g: string): Pending<string> => ({ ready: g, result: Promise.resolve(g), release: () => {} });

/** A payload that arrives when the test says so. */
function later(): { pending: Pending<string>; arrive(g: string): void; fail(e: unknown): void } {
  let arrive!: (g: string) => void;
  let fail!: (e: unknown) => void;
  const result = new Promise<string>((res, rej) => ((arrive = res), (fail = rej)));
  return { pending: { ready: null, result, release: () => {} }, arrive, fail };
}

/** Appends every group `joins` lets in; records each batch; a write's result is its group + "!". */
function recorder(joins: (g: string) => boolean = () => true) {
  const batches: string[][] = [];
  const append: Append<string, string> = async (first, takeFollowers) => {
    const followers = takeFollowers(joins);
    batches.push([first, ...followers.payloads]);
    followers.landed(followers.payloads.map((g) => `${g}!`));
    return `${first}!`;
  };
  return { batches, append };
}

describe("append queue", () => {
  it("a write's turn takes the ready writes right behind it, in call order", async () => {
    const q = new AppendQueue<string, string>();
    const { batches, append } = recorder();
    const results = await Promise.all(["a", "b", "c"].map((g) => q.write(ready(g), append)));
    expect(results).toEqual(["a!", "b!", "c!"]);
    expect(batches).toEqual([["a", "b", "c"]]);
  });

  it("a task queued between writes ends the batch, and runs between them", async () => {
    const q = new AppendQueue<string, string>();
    const { batches, append } = recorder();
    const order: string[] = [];
    const done = [q.write(ready("a"), append), q.write(ready("b"), append)];
    done.push(q.task(async () => (order.push(`task after ${batches.length} batch`), "task")));
    done.push(q.write(ready("c"), append), q.write(ready("d"), append));
    expect(await Promise.all(done)).toEqual(["a!", "b!", "task", "c!", "d!"]);
    expect(batches).toEqual([["a", "b"], ["c", "d"]]);
    expect(order).toEqual(["task after 1 batch"]);
  });

  it("a write not yet ready ends the batch; it takes the ones behind it when its turn comes", async () => {
    const q = new AppendQueue<string, string>();
    const { batches, append } = recorder();
    const b = later();
    const done = [q.write(ready("a"), append), q.write(b.pending, append), q.write(ready("c"), append)];
    expect(await done[0]).toBe("a!");
    b.arrive("b");
    expect(await Promise.all(done)).toEqual(["a!", "b!", "c!"]);
    expect(batches).toEqual([["a"], ["b", "c"]]);
  });

  it("the first write the rule refuses ends the batch, even if later ones would pass", async () => {
    const q = new AppendQueue<string, string>();
    const { batches, append } = recorder((g) => g !== "c");
    await Promise.all(["a", "b", "c", "d"].map((g) => q.write(ready(g), append)));
    expect(batches).toEqual([["a", "b"], ["c", "d"]]);
  });

  it("a failed append rejects every write in its batch; the writes after it go on", async () => {
    const q = new AppendQueue<string, string>((e) => new Error(`wrapped: ${(e as Error).message}`));
    const boom = new Error("disk full");
    const append: Append<string, string> = async (first, takeFollowers) => {
      const followers = takeFollowers(() => true);
      if (first === "a") {
        followers.failed(boom);
        throw boom;
      }
      followers.landed(followers.payloads);
      return first;
    };
    const failed = [q.write(ready("a"), append), q.write(ready("b"), append)];
    const cut = q.task(async () => {});
    const after = q.write(ready("c"), append);
    for (const p of failed) await expect(p).rejects.toThrow("wrapped: disk full");
    await cut;
    expect(await after).toBe("c");
  });

  it("a payload that fails rejects its own write only, through asError", async () => {
    const q = new AppendQueue<string, string>((e) => new Error(`wrapped: ${(e as Error).message}`));
    const { batches, append } = recorder();
    const b = later();
    b.fail(new Error("spool gone"));
    const done = [q.write(ready("a"), append), q.write(b.pending, append), q.write(ready("c"), append)];
    const settled = await Promise.allSettled(done);
    expect(settled.map((s) => (s.status === "fulfilled" ? s.value : (s.reason as Error).message))).toEqual(["a!", "wrapped: spool gone", "c!"]);
    expect(batches).toEqual([["a"], ["c"]]);
  });

  it("releases each write's payload once its turn is over: appended, joined or failed", async () => {
    const q = new AppendQueue<string, string>();
    const { append } = recorder();
    const released: string[] = [];
    const tracked = (g: string): Pending<string> => ({ ...ready(g), release: () => released.push(g) });
    const b = later();
    b.fail(new Error("no"));
    const done = [q.write(tracked("a"), append), q.write(tracked("b"), append), q.write({ ...b.pending, release: () => released.push("x") }, append)];
    await Promise.allSettled(done);
    expect(released).toEqual(["a", "b", "x"]);
  });
});
