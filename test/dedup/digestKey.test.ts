/** parseDigest: every spelling of a WARC payload digest it accepts, and those it refuses. */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { parseDigest } from "../../src/dedup/digestKey.js";
import { base32 } from "../../src/warc/digest.js";

describe("parseDigest", () => {
  const sha1 = createHash("sha1").update("lathe").digest();
  const sha256 = createHash("sha256").update("lathe").digest();
  const b32 = base32(sha1);

  it("reads base32 in either case, padded or not, and hex", () => {
    for (const v of [`sha1:${b32}`, `sha1:${b32.toLowerCase()}`, `SHA-1:${b32}`, ` sha1:${b32}== `, `sha1:${sha1.toString("hex")}`, `sha1:${sha1.toString("hex").toUpperCase()}`]) {
      expect(parseDigest(v), v).toEqual({ alg: "sha1", bytes: sha1 });
    }
    for (const v of [`sha256:${base32(sha256)}`, `sha-256:${base32(sha256).toLowerCase()}====`, `sha256:${sha256.toString("hex")}`]) {
      expect(parseDigest(v), v).toEqual({ alg: "sha256", bytes: sha256 });
    }
  });

  it("refuses other characters, inner padding, other lengths and other algorithms", () => {
    const refused = [`sha1:${b32.slice(0, 31)}1`, `sha1:${b32.slice(0, 16)}=${b32.slice(17)}`, `sha1:${b32.slice(0, 31)}`, `sha1:${b32}AAAAAAAA`, `sha1:${b32.slice(0, 31)}é`, `md5:${b32}`, "sha1:", "sha1:===="];
    for (const v of refused) expect(parseDigest(v), v).toBeNull();
    expect(parseDigest(`sha256:${b32}`)).toBeNull();
  });

  it("takes the non-ASCII letters toUpperCase() turns into base32 ones as those letters", () => {
    // ı (dotless i) upper-cases to I, ſ (long s) to S: accepted as such since the first release
    const odd = b32.replace(/I/g, "ı").replace(/S/g, "ſ");
    const plain = `sha1:${"I".repeat(16)}${"S".repeat(16)}`;
    expect(parseDigest(`sha1:${odd}`)).toEqual({ alg: "sha1", bytes: sha1 });
    expect(parseDigest(`sha1:${"ı".repeat(16)}${"ſ".repeat(16)}`)).toEqual(parseDigest(plain));
  });

  it("reads lathe's own 37-character spelling as any other: trimmed, ß upper-cased to SS, a line break refused", () => {
    const b = b32.slice(0, 30);
    // Trimmed first, then ß becomes SS: 32 characters, a valid digest.
    expect(parseDigest(`sha1:${b}ß `)).toEqual(parseDigest(`sha1:${b}SS`));
    expect(parseDigest(`sha1:${b}ß `)).not.toBeNull();
    expect(parseDigest(`sha1:${b}ßA`)).toEqual(parseDigest(`sha1:${b}SSA`)); // 33 characters: the extra bits dropped
    expect(parseDigest(`sha1:${b32.slice(0, 31)} `)).toBeNull();
    expect(parseDigest(`sha1:${b32.slice(0, 31)}\u00a0`)).toBeNull();
    expect(parseDigest(`sha1:${b32.slice(0, 16)}\n${b32.slice(17)}`)).toBeNull();
    expect(parseDigest(`sha1:${b32.slice(0, 16)}\u2028${b32.slice(17)}`)).toBeNull();
    expect(parseDigest(`sha1:${b32.slice(0, 28)}====`)).toBeNull();
    expect(parseDigest(`sha1:${b32.slice(0, 31)}ſ`)).toEqual(parseDigest(`sha1:${b32.slice(0, 31)}S`));
  });
});
