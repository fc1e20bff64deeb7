import { describe, expect, it } from "vitest";
import { KeyedQueue } from "../../src/core/keyedQueue.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("KeyedQueue", () => {
  it("runs tasks of one key one at a time in order, other keys alongside; a failure does not stop the queue", async () => {
    const q = new KeyedQueue();
    const log: string[] = [];
    const task = (name: string, ms: number, fail = false) => async () => {
      log.push(`${name}+`);
      await sleep(ms);
      log.push(`${name}-`);
      if (fail) throw new Error(name);
      return name;
    };
    const a1 = q.run("a", task("a1", 30, true));
    const a2 = q.run("a", task("a2", 5));
    const b1 = q.run("b", task("b1", 5));
    await expect(a1).rejects.toThrow("a1");
    expect(await a2).toBe("a2");
    expect(await b1).toBe("b1");
    expect(log.indexOf("a2+")).toBeGreaterThan(log.indexOf("a1-"));
    expect(log.indexOf("b1+")).toBeLessThan(log.indexOf("a1-"));
  });
});
