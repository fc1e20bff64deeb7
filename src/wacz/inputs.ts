/**
 * The WARC files a WACZ is made of, checked before any work: each a closed, regular file named
 * `.warc.gz` or `.warc` whose first bytes are what the name says (a gzip member, or `WARC/`),
 * and no two with the same name (they all go into one `archive/` folder).
 */
import { open, stat } from "node:fs/promises";
import { basename, resolve } from "node:path";
import { errorMessage } from "../core/errors.js";
import { WaczError } from "./waczError.js";

export interface WarcInput {
  path: string;
  /** Its name inside `archive/` (and the CDXJ `filename`). */
  name: string;
  size: number;
  mtime: Date;
}

export async function checkWarcInputs(paths: string[]): Promise<WarcInput[]> {
  if (paths.length === 0) throw new WaczError("not-found", "no WARC files to package");
  const byName = new Map<string, string>();
  const out: WarcInput[] = [];
  for (const given of paths) {
    const path = resolve(given);
    const name = basename(path);
    if (name.endsWith(".open")) throw new WaczError("conflict", `${given} is still being written (.open): package it once lathe has closed it (a stopped lathe finishes .open files when it starts again)`);
    const st = await stat(path).catch((e: unknown) => {
      throw new WaczError("not-found", `cannot read ${given}: ${errorMessage(e)}`);
    });
    if (!st.isFile()) throw new WaczError("not-found", `${given} is not a file`);
    if (!/\.warc(\.gz)?$/.test(name)) throw new WaczError("damaged", `${given} is not a WARC file: its name must end in .warc.gz or .warc`);
    const other = byName.get(name);
    if (other !== undefined) throw new WaczError("damaged", `${other} and ${given} have the same name; a WACZ holds its WARCs in one folder`);
    byName.set(name, given);
    await checkMagic(path, given, name.endsWith(".gz"), st.size);
    out.push({ path, name, size: st.size, mtime: st.mtime });
  }
  return out;
}

async function checkMagic(path: string, given: string, gzip: boolean, size: number): Promise<void> {
  const head = Buffer.alloc(6);
  const fh = await open(path, "r");
  try {
    await fh.read(head, 0, 6, 0);
  } finally {
    await fh.close();
  }
  const ok = gzip ? size >= 18 && head[0] === 0x1f && head[1] === 0x8b : size >= 6 && head.subarray(0, 5).toString("latin1") === "WARC/";
  if (!ok) throw new WaczError("damaged", `${given} is not a WARC file: it does not start with ${gzip ? "a gzip member" : "WARC/"}`);
}
