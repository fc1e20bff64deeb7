/**
 * A Map bounded to `max` entries that forgets the least recently set ones first, in O(1) amortised
 * per call.
 *
 * WHY not a plain Map evicting `map.keys().next()`: V8 leaves a hole for every deleted entry until
 * the table is rebuilt, and an iterator walks every hole from the start. A Map kept at its bound by
 * deleting its first key thus scans thousands of holes per eviction — 15–45 µs at 5,000–50,000
 * entries on this project's machine, paid on every capture by the live feed and the page index.
 * Here the order of sets is kept in a queue of its own; entries set again since leave stale queue
 * slots, skipped on eviction and dropped when the queue is compacted.
 */
export class RecentMap<K, V> {
  readonly #max: number;
  readonly #map = new Map<K, { value: V; seq: number }>();
  /** Keys in the order they were set, with the set's sequence number (stale when the key was set again or deleted). */
  #keys: K[] = [];
  #seqs: number[] = [];
  #head = 0;
  #seq = 0;

  constructor(max: number) {
    if (!(max >= 1)) throw new RangeError(`RecentMap needs room for at least one entry (got ${max})`);
    this.#max = max;
  }

  get size(): number {
    return this.#map.size;
  }

  get(key: K): V | undefined {
    return this.#map.get(key)?.value;
  }

  has(key: K): boolean {
    return this.#map.has(key);
  }

  /** Set `key` and make it the most recent; the least recent entries go past the bound. */
  set(key: K, value: V): this {
    const seq = ++this.#seq;
    this.#map.set(key, { value, seq });
    this.#keys.push(key);
    this.#seqs.push(seq);
    while (this.#map.size > this.#max) this.#evictOldest();
    // Consumed slots (before the head) and stale ones (keys set again) would otherwise pile up.
    const pending = this.#keys.length - this.#head;
    if (pending > 2 * this.#map.size + 64 || (this.#head > 1024 && this.#head > pending)) this.#compact();
    return this;
  }

  delete(key: K): boolean {
    return this.#map.delete(key);
  }

  #evictOldest(): void {
    while (this.#head < this.#keys.length) {
      const i = this.#head++;
      const key = this.#keys[i]!;
      const live = this.#map.get(key);
      this.#keys[i] = undefined as K; // let the key be collected
      if (live && live.seq === this.#seqs[i]) {
        this.#map.delete(key);
        return;
      }
    }
  }

  #compact(): void {
    const keys: K[] = [];
    const seqs: number[] = [];
    for (let i = this.#head; i < this.#keys.length; i++) {
      const key = this.#keys[i]!;
      if (this.#map.get(key)?.seq === this.#seqs[i]) {
        keys.push(key);
        seqs.push(this.#seqs[i]!);
      }
    }
    this.#keys = keys;
    this.#seqs = seqs;
    this.#head = 0;
  }
}
