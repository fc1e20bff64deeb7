import { randomUUID } from "node:crypto";

/** Record ids, injected so golden tests can use a predictable sequence. */
export interface IdSource {
  /** A lowercase RFC 4122 version-4 UUID, without the urn:uuid: wrapper. */
  uuid(): string;
}

export const randomIds: IdSource = { uuid: () => randomUUID() };

/** Deterministic v4-shaped UUIDs for tests: 00000000-0000-4000-8000-<12 hex counter>. */
export function sequentialIds(start = 1): IdSource {
  let n = start;
  return {
    uuid() {
      const hex = (n++).toString(16).padStart(12, "0");
      return `00000000-0000-4000-8000-${hex}`;
    },
  };
}

export function recordId(uuid: string): string {
  return `<urn:uuid:${uuid}>`;
}
