import { describe, expect, it } from "vitest";
import { fieldValues, findHeadEnd, firstFieldValue, isChunked, parseHead, rewriteHead } from "../../src/capture/httpHead.js";

const head = (s: string) => Buffer.from(s, "latin1");

describe("parseHead", () => {
  it("gives the start line and each field with its name's byte offsets", () => {
    const bytes = head("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\ncontent-length:  12 \r\n\r\n");
    const h = parseHead(bytes);
    expect(h.startLine).toBe("HTTP/1.1 200 OK");
    expect(h.fields.map((f) => [f.name, f.value])).toEqual([["Content-Type", "text/html"], ["content-length", "12"]]);
    for (const f of h.fields) expect(bytes.subarray(f.nameStart, f.nameEnd).toString("latin1")).toBe(f.name);
  });

  it("skips continuation lines, lines without a name and lines without a colon", () => {
    const h = parseHead(head("HTTP/1.1 200 OK\r\nX-A: one\r\n  folded: not a field\r\n\tx: tab\r\n:empty-name\r\nno colon here\r\nX-B: two\r\n\r\n"));
    expect(h.fields.map((f) => f.name)).toEqual(["X-A", "X-B"]);
  });

  it("keeps latin1 bytes as they are and trims what String.trim trims", () => {
    const bytes = Buffer.from("HTTP/1.1 200 OK\r\nX-Name:\xa0caf\xe9\xa0 \r\n\r\n", "latin1");
    const [f] = parseHead(bytes).fields;
    expect(f!.value).toBe("caf\xe9");
    expect(Buffer.from(f!.value, "latin1")).toEqual(Buffer.from([0x63, 0x61, 0x66, 0xe9]));
  });

  it("reads bare LF line endings and a colon that only a later line has", () => {
    const bytes = head("GET / HTTP/1.1\nHost: a\nnocolon\nX: 1:2\n\n");
    const h = parseHead(bytes);
    expect(h.startLine).toBe("GET / HTTP/1.1");
    expect(h.fields.map((f) => [f.name, f.value])).toEqual([["Host", "a"], ["X", "1:2"]]);
    expect(findHeadEnd(bytes)).toBe(bytes.length);
  });
});

describe("fieldValues", () => {
  it("matches names case-insensitively, every occurrence, in order", () => {
    const h = parseHead(head("HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookiee: no\r\nset-cookie: b=2\r\nX: y\r\n\r\n"));
    expect(fieldValues(h, "SET-COOKIE")).toEqual(["a=1", "b=2"]);
    expect(fieldValues(h, "content-length")).toEqual([]);
  });
});

describe("rewriteHead", () => {
  it("renames in place and appends before the blank line", () => {
    const h = parseHead(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n"));
    const out = rewriteHead(h, { "transfer-encoding": "X-Orig-Transfer-Encoding" }, [["Expires", "0"]], [["Content-Length", "5"]]);
    expect(out.toString("latin1")).toBe(
      "HTTP/1.1 200 OK\r\nX-Orig-Transfer-Encoding: chunked\r\nX: y\r\nX-Orig-Trailer-Expires: 0\r\nContent-Length: 5\r\n\r\n",
    );
  });
});

describe("firstFieldValue", () => {
  it("gives the first value of a field whatever its case, or undefined", () => {
    const h = parseHead(head("GET / HTTP/1.1\r\nHost: a\r\nCONTENT-TYPE: text/html\r\ncontent-type: text/plain\r\nReferer:\r\n\r\n"));
    expect(firstFieldValue(h.fields, "content-type")).toBe("text/html");
    expect(firstFieldValue(h.fields, "referer")).toBe("");
    expect(firstFieldValue(h.fields, "content-length")).toBeUndefined();
    expect(firstFieldValue([], "host")).toBeUndefined();
  });
});

describe("isChunked", () => {
  const chunked = (fields: string) => isChunked(parseHead(head(`HTTP/1.1 200 OK\r\n${fields}\r\n`)));
  it("finds chunked in any Transfer-Encoding field, whatever its case and spacing", () => {
    expect(chunked("Transfer-Encoding: chunked\r\n")).toBe(true);
    expect(chunked("transfer-encoding: gzip ,  Chunked \r\n")).toBe(true);
    expect(chunked("Transfer-Encoding: gzip\r\nTRANSFER-ENCODING: chunked\r\n")).toBe(true);
  });
  it("is false without a chunked coding", () => {
    expect(chunked("Content-Length: 5\r\n")).toBe(false);
    expect(chunked("Transfer-Encoding: gzip\r\nX-Transfer-Encoding: chunked\r\n")).toBe(false);
    expect(chunked("Transfer-Encoding: chunkedx\r\n")).toBe(false);
    expect(chunked("")).toBe(false);
  });
});
