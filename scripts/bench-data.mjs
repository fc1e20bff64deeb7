// Generated capture contents the benchmarks share (bench-reader.mjs, bench-wacz.mjs): seeded
// pseudo-random numbers, so two runs write the same files, and HTML-like text that compresses
// about as real pages do. Node built-ins only.

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32). */
export function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const WORDS = "the archive of record web page crawl capture lathe proxy response request digest payload index offset length revisit original server client header body content type text html script style image link anchor table row column value".split(" ");

/** `n` bytes of HTML-like text: paragraphs of words and numbers drawn from `r`. */
export function textBody(n, r) {
  const parts = ["<!DOCTYPE html>\n<html><head><title>page</title></head><body>\n"];
  let len = parts[0].length;
  while (len < n) {
    const words = [];
    const k = 8 + Math.floor(r() * 24);
    for (let i = 0; i < k; i++) words.push(WORDS[Math.floor(r() * WORDS.length)]);
    const p = `<p class="c${Math.floor(r() * 50)}">${words.join(" ")} ${Math.floor(r() * 1e9)}</p>\n`;
    parts.push(p);
    len += p.length;
  }
  return Buffer.from(parts.join("")).subarray(0, n);
}
