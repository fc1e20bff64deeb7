import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { digestKey, digestTag, KEY_SPACE, packRecordId, unpackRecordId, urlKey } from "../../src/dedup/sqliteKeys.js";

// These functions are part of the dedup database format (schema version 1): a change here makes
// existing databases unreadable, so their values are pinned.
describe("dedup store keys (on-disk format)", () => {
  const d = createHash("sha1").update("lathe").digest(); // 1d6db4b2f79502181ea27ee7f64fe7651f5a9832

  it("digestKey: pinned values, salted by bucket and algorithm, within 47 bits", () => {
    expect(digestKey(1, 1, d)).toBe(65264021331590);
    expect(digestKey(2, 1, d)).toBe(106925029222781);
    expect(digestKey(1, 2, d)).toBe(36787965129477);
    expect(digestTag(d)).toBe(536);
    for (let i = 0; i < 1000; i++) {
      const k = digestKey(i, 1 + (i % 2), createHash("sha1").update(String(i)).digest());
      expect(Number.isSafeInteger(k) && k >= 0 && k < KEY_SPACE).toBe(true);
    }
  });

  it("urlKey: pinned values, salted by bucket, within 47 bits", () => {
    expect(urlKey(1, "https://example.com/")).toBe(92290477941609);
    expect(urlKey(2, "https://example.com/")).toBe(105399711251005);
    expect(urlKey(1, "")).toBe(74929325214177);
    expect(urlKey(1, "https://exämple.com/ü")).toBe(50764681284426);
    const seen = new Set<number>();
    for (let i = 0; i < 10_000; i++) {
      const k = urlKey(1, `https://example.com/page/${i}`);
      expect(k >= 0 && k < KEY_SPACE).toBe(true);
      seen.add(k);
    }
    expect(seen.size).toBe(10_000);
  });

  it("record ids: lathe's own as 16 bytes, anything else verbatim", () => {
    const id = "<urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e>";
    const packed = packRecordId(id);
    expect(Buffer.isBuffer(packed) && packed.toString("hex")).toBe("0f8fad5bd9cb469fa16570867728950e");
    expect(unpackRecordId(packed)).toBe(id);
    for (const other of ["<urn:uuid:0F8FAD5B-D9CB-469F-A165-70867728950E>", "<urn:uuid:0f8fad5b-d9cb-469f-a165_70867728950e>", "urn:uuid:x", ""]) {
      expect(packRecordId(other)).toBe(other);
      expect(unpackRecordId(other)).toBe(other);
    }
    expect(packRecordId(null)).toBeNull();
    expect(unpackRecordId(null)).toBeNull();
  });
});
