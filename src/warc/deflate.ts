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
const { Z_FINISH } = zlib.constants;

interface RawHandle {
  writeSync(flush: number, input: Uint8Array, inOff: number, inLen: number, out: Uint8Array, outOff: number, outLen: number): void;
  reset(): void;
}

/**
 * Raw deflate of `input` (whole: fed in one call, as `zlib.*Sync` feeds it, so the bytes are the
 * same at every level) into a new buffer with `headRoom` bytes before it and `tailRoom` after.
 */
type RawDeflate = (input: Uint8Array, headRoom: number, tailRoom: number) => Buffer;

function reusedDeflate(level: number): RawDeflate | null {
  const engine = zlib.createDeflateRaw({ level }) as unknown as { _handle?: RawHandle; _writeState?: Uint32Array };
  const handle = engine._handle;
  const state = engine._writeState;
  if (!handle || typeof handle.writeSync !== "function" || typeof handle.reset !== "function" || !(state instanceof Uint32Array)) return null;
  const out = Buffer.allocUnsafe(OUT_BYTES);
  return (input, headRoom, tailRoom) => {
    // Most members fit in one output chunk: copied once, into the member itself.
    const produced: Buffer[] = [];
    let producedBytes = 0;
    let inOff = 0;
    let inLen = input.byteLength;
    try {
      for (;;) {
        handle.writeSync(Z_FINISH, input, inOff, inLen, out, 0, OUT_BYTES);
        const availOut = state[0]!;
        const availIn = state[1]!;
        const have = OUT_BYTES - availOut;
        inOff += inLen - availIn;
        inLen = availIn;
        // Output space left over means zlib finished the stream.
        if (availOut !== 0) {
          const member = Buffer.allocUnsafe(headRoom + producedBytes + have + tailRoom);
          let at = headRoom;
          for (const c of produced) at += c.copy(member, at);
          out.copy(member, at, 0, have);
          return member;
        }
        produced.push(Buffer.from(out));
        producedBytes += have;
      }
    } finally {
      handle.reset();
    }
  };
}

const engines = new Map<number, RawDeflate>();

function rawDeflate(level: number): RawDeflate {
  let d = engines.get(level);
  if (!d) {
    d = reusedDeflate(level) ?? ((input, headRoom, tailRoom) => {
      const body = zlib.deflateRawSync(input, { level });
      const member = Buffer.allocUnsafe(headRoom + body.length + tailRoom);
      body.copy(member, headRoom);
      return member;
    });
    engines.set(level, d);
  }
  return d;
}

/** Up to this many bytes of parts are joined in one reused buffer before they are deflated. */
const JOIN_BYTES = 64 * 1024;
const joined = Buffer.allocUnsafe(JOIN_BYTES);

/** `parts` as one buffer: the part itself when there is one, else a copy (in `joined` when it fits; used at once). */
function oneInput(parts: readonly Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  if (total > JOIN_BYTES) return Buffer.concat(parts as Uint8Array[], total);
  let at = 0;
  for (const p of parts) {
    joined.set(p, at);
    at += p.byteLength;
  }
  return joined.subarray(0, total);
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
  for (const p of parts) total += p.byteLength;
  const input = oneInput(parts, total);
  const member = rawDeflate(level)(input, 10, 8);
  member[0] = 0x1f;
  member[1] = 0x8b;
  member[2] = 8; // CM deflate
  member[3] = 0; // FLG
  member.writeUInt32LE(0, 4); // MTIME
  member[8] = xfl(level);
  member[9] = 3; // OS: Unix, as zlib writes it
  member.writeUInt32LE(zlib.crc32(input) >>> 0, member.length - 8);
  member.writeUInt32LE(total >>> 0, member.length - 4);
  return member;
}
