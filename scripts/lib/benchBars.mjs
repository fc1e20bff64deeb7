// Scoring for scripts/bench.mjs: per-row medians over rounds, the CPU each proxy spends per exchange
// (per MB on the large-body rows), and the bars of issue #25 — lathe's CPU as a ratio to the bare
// Node proxies measured in the same session (tinyproxy for plain HTTP, tinymitm for interception).
// Ratios to another session's numbers mean nothing on a shared machine, so only these are scored.

export const BARS = {
  httpSmallCpu: 2.0, // http-small/c32 CPU per exchange, lathe / tinyproxy
  httpsSmallCpu: 2.0, // https-small/c32, lathe / tinymitm
  firstContactCpu: 1.3, // https-newconn/first-c1 (certificate issuance included), lathe / tinymitm
  largeCpuPerMB: 3.0, // http-large 20 MB (50 MB without --quick) c1 CPU per MB, lathe / tinyproxy
  largeVsDirect: 0.67, // the same row's MB/s, lathe / direct (what warcprox reached)
  slowTtfbMs: 20, // slow/c16 ttfb50, lathe - direct
  rssMB: 200, // lathe peak RSS over the whole run
};

/** Which floor a row's CPU is compared with: interception rows against tinymitm, the rest tinyproxy. */
export const floorOf = (id) => (/(^|\/)https/.test(id) ? "tinymitm" : "tinyproxy");

/** Large-body rows are scored per MB, the others per exchange. */
export const perMB = (id) => id.startsWith("http-large/");

export const median = (xs) => {
  const v = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

/** CPU of one run of a row: µs per exchange, or ms per MB of body for the large rows. */
function cpuOf(r) {
  const s = r.proxy?.cpuS;
  if (typeof s !== "number" || !r.ok) return null;
  return perMB(r.id) ? (s * 1e3) / (r.bodyBytes / 1e6) : (s * 1e6) / r.ok;
}

/** Per row id over the runs (rounds) of one label: medians, total errors, peak RSS. */
export function rowsOf(runs) {
  const byId = new Map();
  for (const run of runs) for (const r of run.results) {
    if (!byId.has(r.id)) byId.set(r.id, []);
    byId.get(r.id).push(r);
  }
  const out = new Map();
  for (const [id, rs] of byId) {
    out.set(id, {
      errors: rs.reduce((s, r) => s + (r.errors || 0), 0),
      reqPerSec: median(rs.map((r) => r.reqPerSec)),
      mbPerSec: median(rs.map((r) => r.mbPerSec)),
      ttfb50: median(rs.map((r) => r.ttfbMs?.p50)),
      cpu: median(rs.map(cpuOf)),
      peakRssKB: Math.max(0, ...rs.map((r) => r.proxy?.peakRssKB ?? 0)),
    });
  }
  return out;
}

const f2 = (x) => (x === null || x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(2));
const f0 = (x) => (x === null || x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(0));
const ratio = (a, b) => (a !== null && b ? a / b : null);

/**
 * The per-row table: direct req/s (MB/s on large rows), then for each proxy its share of direct and
 * its CPU (µs/exchange, or ms/MB), then lathe's CPU over its floor's. Rows with errors say ERR.
 */
export function rowTable(byLabel, proxies) {
  const direct = byLabel.direct;
  const ids = [...new Set(Object.values(byLabel).flatMap((m) => [...m.keys()]))];
  const head = ["row", "direct", ...proxies.flatMap((p) => [`${p} ×dir`, `${p} cpu`]), "lathe/floor"];
  const lines = [head];
  for (const id of ids) {
    const d = direct?.get(id);
    const metric = perMB(id) ? "mbPerSec" : "reqPerSec";
    const cells = [`${id} (${perMB(id) ? "MB/s, ms/MB" : "req/s, µs/ex"})`, d ? (d.errors ? "ERR" : f0(d[metric])) : "-"];
    for (const p of proxies) {
      const r = byLabel[p]?.get(id);
      if (!r) cells.push("-", "-");
      else if (r.errors) cells.push("ERR", "ERR");
      else cells.push(d && !d.errors ? f2(ratio(r[metric], d[metric])) : "-", perMB(id) ? f2(r.cpu) : f0(r.cpu));
    }
    const l = byLabel.lathe?.get(id);
    const fl = byLabel[floorOf(id)]?.get(id);
    cells.push(l && fl && !l.errors && !fl.errors ? `${f2(ratio(l.cpu, fl.cpu))} (${floorOf(id)})` : "-");
    lines.push(cells);
  }
  const widths = head.map((_, i) => Math.max(...lines.map((c) => String(c[i]).length)));
  return lines.map((c) => c.map((x, i) => (i ? String(x).padStart(widths[i]) : String(x).padEnd(widths[i]))).join("  "));
}

/** PASS/FAIL/SKIP per bar of issue #25; `largeId` is the large-body row this run has. */
export function barChecks(byLabel, { largeId, wholeRunPeakKB }) {
  const { direct, lathe, tinyproxy, tinymitm } = byLabel;
  const lines = [];
  const verdicts = [];
  const put = (verdict, text) => {
    verdicts.push(verdict);
    lines.push(`${verdict.padEnd(4)}  ${text}`);
  };
  const rowPair = (id, floorName, floor) => {
    const a = floor?.get(id);
    const b = lathe?.get(id);
    if (!a || !b) return put("SKIP", `${id}: row not run for lathe and ${floorName}`), null;
    if (a.errors || b.errors) return put("FAIL", `${id}: row had errors (${floorName} ${a.errors}, lathe ${b.errors}), not scored`), null;
    return [a, b];
  };
  const cpuBar = (id, floorName, goal, unit) => {
    const p = rowPair(id, floorName, byLabel[floorName]);
    if (!p) return;
    const r = ratio(p[1].cpu, p[0].cpu);
    put(r !== null && r <= goal ? "PASS" : "FAIL", `${id} CPU ${unit} lathe/${floorName} = ${f2(r)} (bar ≤ ${goal}; lathe ${f2(p[1].cpu)}, ${floorName} ${f2(p[0].cpu)})`);
  };
  cpuBar("http-small/c32", "tinyproxy", BARS.httpSmallCpu, "µs/exchange");
  cpuBar("https-small/c32", "tinymitm", BARS.httpsSmallCpu, "µs/exchange");
  cpuBar("https-newconn/first-c1", "tinymitm", BARS.firstContactCpu, "µs/exchange (first contact)");
  cpuBar(largeId, "tinyproxy", BARS.largeCpuPerMB, "ms/MB");
  {
    const p = rowPair(largeId, "direct", direct);
    if (p) {
      const r = ratio(p[1].mbPerSec, p[0].mbPerSec);
      put(r !== null && r >= BARS.largeVsDirect ? "PASS" : "FAIL", `${largeId} MB/s lathe/direct = ${f2(r)} (bar ≥ ${BARS.largeVsDirect}; lathe ${f2(p[1].mbPerSec)}, direct ${f2(p[0].mbPerSec)})`);
    }
  }
  {
    const p = rowPair("slow/c16", "direct", direct);
    if (p) {
      const d = p[1].ttfb50 - p[0].ttfb50;
      put(d <= BARS.slowTtfbMs ? "PASS" : "FAIL", `slow/c16 ttfb50 lathe - direct = ${f2(d)} ms (bar ≤ ${BARS.slowTtfbMs}; lathe ${f2(p[1].ttfb50)}, direct ${f2(p[0].ttfb50)})`);
    }
  }
  {
    const rowsPeak = Math.max(0, ...[...(lathe?.values() ?? [])].map((r) => r.peakRssKB));
    const mb = Math.max(rowsPeak, wholeRunPeakKB) / 1024;
    if (!mb) put("SKIP", `lathe peak RSS ≤ ${BARS.rssMB} MB: not sampled`);
    else put(mb <= BARS.rssMB ? "PASS" : "FAIL", `lathe peak RSS = ${mb.toFixed(0)} MB over the whole run (bar ≤ ${BARS.rssMB} MB)`);
  }
  {
    const errs = [...(lathe?.entries() ?? [])].filter(([, r]) => r.errors);
    const total = errs.reduce((s, [, r]) => s + r.errors, 0);
    if (!lathe) put("SKIP", "zero mismatches: lathe not run");
    else put(total === 0 ? "PASS" : "FAIL", total === 0 ? `zero mismatches or errors through lathe (${lathe.size} rows, every body checked byte for byte)` : `${total} errors through lathe in ${errs.map(([id]) => id).join(", ")}`);
    for (const [name, rows] of Object.entries({ direct, tinyproxy, tinymitm })) {
      const n = [...(rows?.values() ?? [])].reduce((s, r) => s + r.errors, 0);
      if (n) lines.push(`note  ${n} errors in the ${name} runs: their rows are not scored`);
    }
  }
  return { lines, failed: verdicts.includes("FAIL") };
}
