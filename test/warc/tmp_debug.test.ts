import { it } from "vitest";
import { stat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { createWarcWriter } from "../../src/warc/writer.js";
import { captureGroup, noise, tempDir, writerOpts } from "./helpers.js";
import { createLogger } from "../../src/core/log.js";
it("dbg", async () => {
  const dir = await tempDir();
  const w = createWarcWriter(writerOpts(dir, { maxFileBytes: 12000, log: createLogger({ level: "debug" }) }));
  for (let i = 0; i < 7; i++) console.log((await w.write(captureGroup(`https://example.com/${i}`, noise(3000, i + 1)))).map(r => [r.filename.slice(24,29), r.offset, r.length]));
  console.log(await w.write(captureGroup("https://example.com/big", noise(30_000, 99))));
  await w.close();
  for (const f of await readdir(dir)) console.log(f, (await stat(join(dir, f))).size);
});
