/** Start a real lathe in this process, on an ephemeral port, with temp WARC and CA directories. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveConfig } from "../../src/config/validate.js";
import type { ConfigInput } from "../../src/config/schema.js";
import { type Lathe, type StartOptions, startLathe } from "../../src/main.js";
import { silentLogger } from "../../src/core/log.js";

export interface TestLathe extends Lathe {
  dir: string;
  certsDir: string;
}

export async function startTestLathe(overrides: ConfigInput = {}, opts: { certsDir?: string; warcDir?: string } & Pick<StartOptions, "log" | "lookup"> = {}): Promise<TestLathe> {
  const dir = opts.warcDir ?? mkdtempSync(join(tmpdir(), "lathe-warcs-"));
  const certsDir = opts.certsDir ?? mkdtempSync(join(tmpdir(), "lathe-certs-"));
  const config = resolveConfig(
    {
      proxy: { port: 0 },
      control: { port: 0 },
      warc: { dir },
      certs: { dir: certsDir },
    },
    overrides,
  );
  const lathe = await startLathe(config, {
    log: opts.log ?? (process.env.LATHE_TEST_LOG ? undefined : silentLogger),
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
  });
  return Object.assign(lathe, { dir, certsDir });
}
