/**
 * Entries into the WACZ's ZIP with their SHA-256 (datapackage.json's `hash`): each buffer read
 * once, hashed, CRC'd (ZipWriter.data) and handed on, so every byte is read from disk once. A
 * small ring of buffers (copyRing, one per package) lets the next read run while the sink still
 * holds the previous chunks; memory is the ring whatever the files' sizes.
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import type { ZipWriter } from "./zipWriter.js";

const CHUNK = 1024 * 1024;
const RING = 4;

/** The buffers one package's copies go through, one after the other (allocated once, not per file). */
export function copyRing(): Buffer[] {
  return Array.from({ length: RING }, () => Buffer.allocUnsafe(CHUNK));
}

/** `sha256:<hex>`, as datapackage.json writes hashes. */
export type Sha256 = string;

/** Called with the bytes of each chunk as it goes by (progress). */
export type OnBytes = (n: number) => void;

/**
 * Copy the file at `path` (exactly `size` bytes: a file that grew or shrank since it was sized
 * is an error, not a silently different package) into the current entry of `zip`.
 */
export async function copyFileEntry(zip: ZipWriter, ring: Buffer[], name: string, path: string, size: number, mtime: Date, onBytes?: OnBytes): Promise<Sha256> {
  const fh = await open(path, "r");
  const hash = createHash("sha256");
  const inFlight: Array<Promise<void> | null> = new Array(RING).fill(null);
  let failure: unknown = null;
  try {
    await zip.begin({ name, size, mtime });
    let pos = 0;
    for (let i = 0; pos < size; i++) {
      const slot = i % RING;
      await inFlight[slot]; // this buffer is free once the sink is done with it
      if (failure) throw failure;
      const buf = ring[slot]!;
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, size - pos), pos);
      if (bytesRead === 0) throw new Error(`${path} shrank while it was being packaged (${pos} of ${size} bytes)`);
      const chunk = buf.subarray(0, bytesRead);
      hash.update(chunk);
      // Not awaited here: the next read runs meanwhile. A failure is kept and thrown at the next turn.
      inFlight[slot] = zip.data(chunk).catch((e: unknown) => {
        failure ??= e;
      });
      pos += bytesRead;
      onBytes?.(bytesRead);
    }
    await Promise.all(inFlight);
    if (failure) throw failure;
    const extra = await fh.read(Buffer.alloc(1), 0, 1, size);
    if (extra.bytesRead > 0) throw new Error(`${path} grew while it was being packaged (more than ${size} bytes)`);
    await zip.end();
  } finally {
    await Promise.allSettled(inFlight.filter((p) => p !== null));
    await fh.close();
  }
  return "sha256:" + hash.digest("hex");
}

/** A small entry held in memory. */
export async function bufferEntry(zip: ZipWriter, name: string, data: Buffer, mtime: Date): Promise<Sha256> {
  await zip.begin({ name, size: data.length, mtime });
  await zip.data(data);
  await zip.end();
  return sha256Of(data);
}

export function sha256Of(data: Buffer): Sha256 {
  return "sha256:" + createHash("sha256").update(data).digest("hex");
}
