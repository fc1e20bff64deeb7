import { afterEach, describe, expect, it } from "vitest";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CrawlLog,
  FETCH_STATUS,
  canonicalizeMetadataUrl,
  crawlLogMime,
  crawlLogPrefix,
  formatCrawlLogLine,
  hopPathAndVia,
} from "../../src/warcprox/crawlLog.js";

const T = (s: string) => new Date(s);
const logTime = T("2026-12-03T10:15:02.123Z");

describe("crawl log lines (§6)", () => {
  it("a response", () => {
    expect(
      formatCrawlLogLine({
        logTime,
        status: 200,
        size: 51234,
        url: "https://example.com/about",
        referer: "https://example.com/",
        metadata: { hop_path: "L", seed: "https://example.com/" },
        contentType: "text/html; charset=UTF-8",
        fetchStart: T("2026-12-03T10:15:00.877Z"),
        fetchEnd: T("2026-12-03T10:15:02.123Z"),
        digest: "sha1:2JZ5ZQ3XJ4WQ7N3Y5YFJ7QK6LZ4T5M2A",
        contentSize: 51642,
        warcFilename: "job1-20261203101455123-00000-crawl7.example.org.warc.gz",
        warcFileOffset: 3021,
        method: "GET",
      }),
    ).toBe(
      "2026-12-03T10:15:02.123Z   200      51234 https://example.com/about L https://example.com/ text/html - " +
        "20261203101500877+1246 sha1:2JZ5ZQ3XJ4WQ7N3Y5YFJ7QK6LZ4T5M2A https://example.com/ - " +
        '{"contentSize":51642,"warcFilename":"job1-20261203101455123-00000-crawl7.example.org.warc.gz","warcFileOffset":3021}',
    );
  });

  it("a revisit (POST, no hop metadata: via = Referer)", () => {
    expect(
      formatCrawlLogLine({
        logTime,
        status: 200,
        size: 1024,
        url: "http://example.com/img.png",
        referer: "http://example.com/",
        contentType: "image/png",
        fetchStart: T("2026-12-03T10:15:01.000Z"),
        durationMs: 12,
        digest: "sha1:AGQSEBJJDSVCPJ3XUTYD7ADE6QUYZTFW",
        revisit: true,
        contentSize: 1300,
        warcFilename: "crawl-1.warc.gz",
        warcFileOffset: 0,
        method: "POST",
      }),
    ).toBe(
      "2026-12-03T10:15:02.123Z   200       1024 http://example.com/img.png - http://example.com/ image/png - " +
        "20261203101501000+12 sha1:AGQSEBJJDSVCPJ3XUTYD7ADE6QUYZTFW - duplicate:digest " +
        '{"contentSize":1300,"warcFilename":"crawl-1.warc.gz","warcFileOffset":0,"method":"POST"}',
    );
  });

  it("a WARCPROX_WRITE_RECORD (204), brozzler's B hop", () => {
    expect(
      formatCrawlLogLine({
        logTime,
        status: 204,
        size: 20480,
        url: "screenshot:https://example.com/",
        metadata: { hop_path: null, brozzled_url: "https://example.com/", hop_via_url: null, seed: "https://example.com/" },
        contentType: "image/jpeg",
        fetchStart: T("2026-12-03T10:15:02.000Z"),
        fetchEnd: T("2026-12-03T10:15:02.004Z"),
        digest: "sha1:NFAXAJOAZJDH2ZS2OGM6ZFXXFBIVXBGZ",
        contentSize: 20480,
        warcFilename: "job1-x.warc.gz",
        warcFileOffset: 9000,
        method: "WARCPROX_WRITE_RECORD",
      }),
    ).toBe(
      "2026-12-03T10:15:02.123Z   204      20480 screenshot:https://example.com/ B https://example.com/ image/jpeg - " +
        "20261203101502000+4 sha1:NFAXAJOAZJDH2ZS2OGM6ZFXXFBIVXBGZ https://example.com/ - " +
        '{"contentSize":20480,"warcFilename":"job1-x.warc.gz","warcFileOffset":9000,"method":"WARCPROX_WRITE_RECORD"}',
    );
  });

  it("a DNS failure (-6)", () => {
    expect(
      formatCrawlLogLine({
        logTime,
        status: FETCH_STATUS.DNS,
        size: null,
        url: "http://no-such-host.invalid/",
        metadata: { hop_path: "L", hop_via_url: "http://example.com/", brozzled_url: "http://example.com/" },
        exception: "Error",
        exceptionMessage: "getaddrinfo ENOTFOUND no-such-host.invalid",
      }),
    ).toBe(
      "2026-12-03T10:15:02.123Z    -6          - http://no-such-host.invalid/ LB http://example.com/ no-type - - - - - " +
        '{"exception":"Error","exceptionMessage":"getaddrinfo_ENOTFOUND_no-such-host.invalid"}',
    );
  });

  it("a connect failure (-2), hop path with hop_via_url and no Referer", () => {
    expect(
      formatCrawlLogLine({
        logTime,
        status: FETCH_STATUS.CONNECT,
        size: null,
        url: "https://example.com:8443/x",
        metadata: { hop_path: "LL", hop_via_url: "https://example.com/a b", brozzled_url: "https://example.com:8443/x" },
        exception: "Error",
        exceptionMessage: "connect ECONNREFUSED 127.0.0.1:8443",
      }),
    ).toBe(
      "2026-12-03T10:15:02.123Z    -2          - https://example.com:8443/x LL https://example.com/a%20b no-type - - - - - " +
        '{"exception":"Error","exceptionMessage":"connect_ECONNREFUSED_127.0.0.1:8443"}',
    );
  });

  it("truncated captures: lenTrunc, timeTrunc (with duplicate:digest), disconnect not annotated", () => {
    const base = {
      logTime,
      status: 200,
      size: 1048576,
      url: "http://example.com/big",
      contentType: "application/octet-stream",
      fetchStart: T("2026-12-03T09:55:02.123Z"),
      fetchEnd: T("2026-12-03T10:15:02.123Z"),
      digest: "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ",
    };
    expect(formatCrawlLogLine({ ...base, truncated: "length" })).toBe(
      "2026-12-03T10:15:02.123Z   200    1048576 http://example.com/big - - application/octet-stream - " +
        "20261203095502123+1200000 sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ - lenTrunc {}",
    );
    expect(formatCrawlLogLine({ ...base, truncated: "time", revisit: true }).split(/ +/).slice(-2)).toEqual([
      "duplicate:digest,timeTrunc",
      "{}",
    ]);
    expect(formatCrawlLogLine({ ...base, truncated: "disconnect" }).split(/ +/).slice(-2)).toEqual(["-", "{}"]);
    expect(formatCrawlLogLine({ ...base, revisit: true }).split(/ +/).slice(-2)).toEqual(["duplicate:digest", "{}"]);
  });

  it("without metadata: hop path `-`, via the referer as a field (encoded, `-` when empty), as with empty metadata", () => {
    const base = { logTime, status: 200, size: 1, url: "http://example.com/" };
    const hopVia = (line: string) => line.split(/ +/).slice(4, 6);
    expect(hopVia(formatCrawlLogLine({ ...base, referer: "http://r/a b" }))).toEqual(["-", "http://r/a%20b"]);
    expect(hopVia(formatCrawlLogLine({ ...base, referer: "" }))).toEqual(["-", "-"]);
    expect(hopVia(formatCrawlLogLine({ ...base, metadata: null }))).toEqual(["-", "-"]);
    for (const referer of ["http://r/a b", "", null]) {
      expect(formatCrawlLogLine({ ...base, referer, metadata: null })).toBe(formatCrawlLogLine({ ...base, referer, metadata: {} }));
    }
  });

  it("field helpers", () => {
    expect(crawlLogMime(null)).toBe("no-type");
    expect(crawlLogMime("")).toBe("no-type");
    expect(crawlLogMime(" text/html")).toBe("no-type");
    expect(crawlLogMime("text/html,application/xml")).toBe("text/html");
    expect(crawlLogMime("application/json;charset=utf-8")).toBe("application/json");
    expect(hopPathAndVia("http://a/", null, undefined)).toEqual(["-", "-"]);
    expect(hopPathAndVia("http://a/", "http://r/", { hop_path: "-" })).toEqual(["-", "-"]);
    expect(hopPathAndVia("http://a/", "http://r/", { hop_path: "L", hop_via_url: "http://v/" })).toEqual(["L", "http://r/"]);
    expect(hopPathAndVia("http://a/", null, { hop_path: "L", brozzled_url: "http://a/" })).toEqual(["L", "-"]);
    expect(canonicalizeMetadataUrl("http://bücher.example/ä b?q=ü")).toBe("http://xn--bcher-kva.example/%C3%A4%20b?q=%C3%BC");
    expect(canonicalizeMetadataUrl("http://Example.com/a%20b")).toBe("http://Example.com/a%20b");
    // seed with a space is percent-encoded; the line keeps 13 fields
    const line = formatCrawlLogLine({ logTime, status: 200, size: 0, url: "http://a/", metadata: { seed: "my seed" } });
    expect(line.split(/ +/)).toHaveLength(13);
    expect(line.split(/ +/)[10]).toBe("my%20seed");
    expect(crawlLogPrefix(undefined)).toBe("crawl");
    expect(crawlLogPrefix("job1")).toBe("job1");
    expect(crawlLogPrefix("../etc")).toBe("crawl");
    expect(crawlLogPrefix("a b")).toBe("crawl");
  });
});

describe("CrawlLog files", () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("appends to <prefix or crawl>-<host>-<port>.log, in call order", async () => {
    dir = await mkdtemp(join(tmpdir(), "lathe-crawllog-"));
    const logDir = join(dir, "logs");
    const log = new CrawlLog({ dir: logDir, port: 8000, hostname: "crawl7" });
    expect(log.fileNameFor("job1")).toBe("job1-crawl7-8000.log");
    const entry = (n: number) => ({ logTime, status: 200, size: n, url: `http://example.com/${n}` });
    await Promise.all([1, 2, 3, 4, 5].map((n) => log.append(entry(n), n % 2 ? "job1" : undefined)));
    await log.close();
    const log2 = new CrawlLog({ dir: logDir, port: 8000, hostname: "crawl7" });
    await log2.append(entry(6), "job1");
    await log2.close();
    expect((await readdir(logDir)).sort()).toEqual(["crawl-crawl7-8000.log", "job1-crawl7-8000.log"]);
    const job1 = (await readFile(join(logDir, "job1-crawl7-8000.log"), "utf8")).split("\n");
    expect(job1.map((l) => l.split(/ +/)[3])).toEqual(["http://example.com/1", "http://example.com/3", "http://example.com/5", "http://example.com/6", undefined]);
    expect(job1[0]).toBe(formatCrawlLogLine(entry(1)));
    const crawl = await readFile(join(logDir, "crawl-crawl7-8000.log"), "utf8");
    expect(crawl).toBe(formatCrawlLogLine(entry(2)) + "\n" + formatCrawlLogLine(entry(4)) + "\n");
    await expect(log.append(entry(7))).rejects.toThrow("closed");
  });

  it("prefixes name their files however many there are; no prefix, an empty or an unsafe one is `crawl`", async () => {
    dir = await mkdtemp(join(tmpdir(), "lathe-crawllog-"));
    const logDir = join(dir, "logs");
    const log = new CrawlLog({ dir: logDir, port: 8000, hostname: "crawl7", coalesceMs: 0 });
    const entry = (n: number) => ({ logTime, status: 200, size: n, url: `http://example.com/${n}` });
    const many = Array.from({ length: 300 }, (_, i) => `p${i}`);
    await Promise.all(many.map((p, i) => log.append(entry(i), p)));
    await Promise.all([null, undefined, "", "../x", "crawl"].map((p, i) => log.append(entry(1000 + i), p)));
    await log.append(entry(2000), "p299");
    await log.close();
    expect((await readdir(logDir)).length).toBe(301);
    expect(await readFile(join(logDir, "p299-crawl7-8000.log"), "utf8")).toBe(formatCrawlLogLine(entry(299)) + "\n" + formatCrawlLogLine(entry(2000)) + "\n");
    const crawl = (await readFile(join(logDir, "crawl-crawl7-8000.log"), "utf8")).split("\n");
    expect(crawl.filter(Boolean).map((l) => l.split(/ +/)[3]).sort()).toEqual([1000, 1001, 1002, 1003, 1004].map((n) => `http://example.com/${n}`));
  });
});
