/**
 * Synchronous gzip members for small records, from one long-lived deflate stream per level.
 *
 * `zlib.gzipSync` builds and tears down a zlib stream on every call (deflateInit allocates
 * ~270 KB of state): for the 0.5–2 KB records that most captures are made of (request records,
 * revisits, response heads) that set-up costs ~25 µs, three times the compression itself. Here
 * one stream per level is reset after each member instead (~7 µs for 500 bytes). The deflate
 * output is byte for byte what `deflateRawSync` / `gzipSync` produce with the same level, and the
 * gzip header and trailer are the ones zlib writes (RFC 1952; FLG 0, MTIME 0, XFL as zlib sets
 * it, OS 3), so a member is identical to `gzipSync(record, { level })`.
 *
 * The reused stream drives Node's zlib binding directly (`_handle.writeSync`, the same call
 * `zlib.*Sync` makes); where a Node version does not expose it, `deflateRawSync` is used.
 */
import zlib from "node:zlib";

// zlib.*Sync output chunk size: stored blocks (level 0) are sized by the output space, so the
// same size gives the same bytes.
const OUT_BYTES = zlib.constants.Z_DEFAULT_CHUNK;
const { Z_NO_FLUSH, Z_FINISH } = zlib.constants;

interface RawHandle {
  writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Uint8Array, outOff: number, outLen: number): void;
  reset(): void;
}

type RawDeflate = (parts: readonly Uint8Array[], total: number) => Buffer;

function reusedDeflate(level: number): RawDeflate | null {
  const engine = zlib.createDeflateRaw({ level }) as unknown as { _handle?: RawHandle; _writeState?: Uint32Array };
  const handle = engine._handle;
  const state = engine._writeState;
  if (!handle || typeof handle.writeSync !== "function" || typeof handle.reset !== "function" || !(state instanceof Uint32Array)) return null;
  const out = Buffer.allocUnsafe(OUT_BYTES);
  return (parts) => {
    const produced: Buffer[] = [];
    let producedBytes = 0;
    const feed = (input: Uint8Array, flush: number) => {
      let inOff = 0;
      let inLen = input.byteLength;
      for (;;) {
        handle.writeSync(flush, input, inOff, inLen, out, 0, OUT_BYTES);
        const availOut = state[0]!;
        const availIn = state[1]!;
        const have = OUT_BYTES - availOut;
        if (have > 0) {
          produced.push(Buffer.from(out.subarray(0, have)));
          producedBytes += have;
        }
        inOff += inLen - availIn;
        inLen = availIn;
        // Output space left over means zlib took all the input it could use for this flush mode.
        if (availOut !== 0) return;
      }
    };
    try {
      const last = parts.length - 1;
      if (last < 0) feed(EMPTY, Z_FINISH);
      else for (let i = 0; i <= last; i++) feed(parts[i]!, i === last ? Z_FINISH : Z_NO_FLUSH);
    } finally {
      handle.reset();
    }
    return produced.length === 1 ? produced[0]! : Buffer.concat(produced, producedBytes);
  };
}

const EMPTY = new Uint8Array(0);
const engines = new Map<number, RawDeflate>();

function rawDeflate(level: number): RawDeflate {
  let d = engines.get(level);
  if (!d) {
    d = reusedDeflate(level) ?? ((parts, total) => zlib.deflateRawSync(Buffer.concat(parts as Uint8Array[], total), { level }));
    engines.set(level, d);
  }
  return d;
}

/** XFL as zlib's deflate sets it in a gzip header (deflate.c): 2 = slowest, 4 = fastest. */
function xfl(level: number): number {
  if (level === 9) return 2;
  return level < 2 ? 4 : 0;
}

/**
 * One gzip member holding `parts` concatenated, compressed at `level`; equal to
 * `gzipSync(Buffer.concat(parts), { level })`.
 */
export function gzipMemberSync(parts: readonly Uint8Array[], level: number): Buffer {
  let total = 0;
  let crc = 0;
  for (const p of parts) {
    total += p.byteLength;
    crc = zlib.crc32(p, crc);
  }
  // Stored blocks (level 0) are split where the input was fed: one buffer keeps them as
  // gzipSync splits them.
  const input = level === 0 && parts.length > 1 ? [Buffer.concat(parts as Uint8Array[], total)] : parts;
  const body = rawDeflate(level)(input, total);
  const member = Buffer.allocUnsafe(10 + body.length + 8);
  member[0] = 0x1f;
  member[1] = 0x8b;
  member[2] = 8; // CM deflate
  member[3] = 0; // FLG
  member.writeUInt32LE(0, 4); // MTIME
  member[8] = xfl(level);
  member[9] = 3; // OS: Unix, as zlib writes it
  body.copy(member, 10);
  member.writeUInt32LE(crc >>> 0, 10 + body.length);
  member.writeUInt32LE(total >>> 0, 14 + body.length);
  return member;
}
