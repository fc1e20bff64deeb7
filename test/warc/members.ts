/** Gzip members built byte by byte (RFC 1952) for the reader's tests, and files made of them. */
import { open, writeFile, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { crc32, deflateRawSync } from "node:zlib";

export interface MemberOptions {
  /** FNAME and FCOMMENT: zero-terminated strings after the extra field. */
  name?: string;
  comment?: string;
  /** FHCRC: two bytes of header CRC at the end of the header. */
  hcrc?: boolean;
  /** Extra subfields (SI1 SI2 LEN data), written before any 'sl' subfield. */
  extra?: Buffer;
  /** The 'sl' subfield: "exact" = this member's own sizes; or given sizes (possibly wrong). */
  sl?: "exact" | { clen: number; ulen: number };
}

/** One extra subfield: two id bytes, a little-endian length, the data. */
export function subfield(id: string, data: Buffer): Buffer {
  const h = Buffer.alloc(4);
  h.write(id, 0, 2, "latin1");
  h.writeUInt16LE(data.length, 2);
  return Buffer.concat([h, data]);
}

/** Bytes of the 'sl' subfield: the member on disk and the record it inflates to. */
function slSubfield(clen: number, ulen: number): Buffer {
  const d = Buffer.alloc(8);
  d.writeUInt32LE(clen, 0);
  d.writeUInt32LE(ulen, 4);
  return subfield("sl", d);
}

/** The member header alone (its 'sl' sizes, when "exact", for a member of `memberLength` bytes). */
function memberHeader(o: MemberOptions, dataLength: number, memberLength: (headerLength: number) => number): Buffer {
  let flg = 0;
  const parts: Buffer[] = [];
  if (o.extra || o.sl) {
    flg |= 0x04;
    const withoutSl = o.extra ?? Buffer.alloc(0);
    const slLength = o.sl ? 12 : 0;
    const xlen = Buffer.alloc(2);
    xlen.writeUInt16LE(withoutSl.length + slLength);
    parts.push(xlen, withoutSl);
    if (o.sl) parts.push(slSubfield(0, 0)); // sizes filled in below, once the header length is known
  }
  if (o.name !== undefined) {
    flg |= 0x08;
    parts.push(Buffer.from(`${o.name}\0`, "latin1"));
  }
  if (o.comment !== undefined) {
    flg |= 0x10;
    parts.push(Buffer.from(`${o.comment}\0`, "latin1"));
  }
  if (o.hcrc) flg |= 0x02;
  const fixed = Buffer.from([0x1f, 0x8b, 0x08, flg, 0, 0, 0, 0, 0, 0xff]);
  const head = Buffer.concat([fixed, ...parts, Buffer.alloc(o.hcrc ? 2 : 0)]);
  if (o.sl) {
    const sl = o.sl === "exact" ? { clen: memberLength(head.length), ulen: dataLength } : o.sl;
    const at = 12 + (o.extra?.length ?? 0) + 4;
    head.writeUInt32LE(sl.clen, at);
    head.writeUInt32LE(sl.ulen, at + 4);
  }
  if (o.hcrc) head.writeUInt16LE(crc32(head.subarray(0, head.length - 2)) & 0xffff, head.length - 2);
  return head;
}

/** A whole gzip member of `data`: header, raw deflate data, CRC32 and ISIZE. */
export function gzipMember(data: Buffer | string, o: MemberOptions = {}): Buffer {
  const d = Buffer.from(data);
  const deflated = deflateRawSync(d);
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc32(d), 0);
  trailer.writeUInt32LE(d.length % 0x1_0000_0000, 4);
  const head = memberHeader(o, d.length, (h) => h + deflated.length + 8);
  return Buffer.concat([head, deflated, trailer]);
}

/** Each part's [offset, length] when the parts are written one after the other. */
export function boundaries(parts: Buffer[]): Array<[number, number]> {
  let at = 0;
  return parts.map((p) => {
    const b: [number, number] = [at, p.length];
    at += p.length;
    return b;
  });
}

/** Write `parts` to `dir/name`; the open handle and the size, for a source to read. */
export async function fileOf(dir: string, name: string, parts: Buffer[]): Promise<{ fh: FileHandle; size: number; path: string }> {
  const path = join(dir, name);
  const bytes = Buffer.concat(parts);
  await writeFile(path, bytes);
  return { fh: await open(path, "r"), size: bytes.length, path };
}

/** A copy of `member` whose CRC32 no longer matches its data. */
export function withBadCrc(member: Buffer): Buffer {
  const b = Buffer.from(member);
  const at = b.length - 8;
  b.writeUInt8(b.readUInt8(at) ^ 0xff, at);
  return b;
}
