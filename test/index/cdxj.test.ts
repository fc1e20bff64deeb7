/** The pure rules of src/index/cdxj.ts and src/index/postQuery.ts (cdxj-and-surt.md §2–§4, §6–§7). */
import { describe, expect, it } from "vitest";
import {
  compareLines,
  formatCdx11,
  formatCdxj,
  mimeValue,
  pyJsonString,
  requestPayload,
  sortLines,
  statusCode,
  warcDateToTimestamp,
  type IndexEntry,
} from "../../src/index/cdxj.js";
import { methodQuery, pyNumberStr, queryFromBody, quotePlus, unquotePlus } from "../../src/index/postQuery.js";
import { gzipSync } from "node:zlib";
import { parseHttpHead } from "../../src/warc/httpHead.js";

const b = (s: string | Buffer) => (typeof s === "string" ? Buffer.from(s, "utf8") : s);

describe("line format", () => {
  const e: IndexEntry = {
    key: "com,example)/",
    timestamp: "20261203105227",
    url: "http://example.com/",
    mime: "text/html",
    status: "200",
    digest: "sha1:AGQSEBJJDSVCPJ3XUTYD7ADE6QUYZTFW",
    length: "636",
    offset: "871",
    filename: "x.warc.gz",
  };
  it("CDXJ: members in reference order, json.dumps separators, all values strings", () => {
    expect(formatCdxj(e)).toBe(
      'com,example)/ 20261203105227 {"url": "http://example.com/", "mime": "text/html", "status": "200", "digest": "sha1:AGQSEBJJDSVCPJ3XUTYD7ADE6QUYZTFW", "length": "636", "offset": "871", "filename": "x.warc.gz"}\n',
    );
    const post = formatCdxj({ ...e, mime: "", status: undefined, requestBody: null, method: "POST" });
    expect(post).toContain('"mime": "", "digest"');
    expect(post.endsWith(', "filename": "x.warc.gz", "requestBody": null, "method": "POST"}\n')).toBe(true);
  });
  it("CDXJ: a line whose first members are missing starts its JSON at the first present one", () => {
    const bare = { key: "-", timestamp: "-", length: "0", offset: "0", filename: "" };
    expect(formatCdxj(bare)).toBe('- - {"length": "0", "offset": "0", "filename": ""}\n');
    const put = formatCdxj({ ...bare, digest: "sha1:X", requestBody: "a=é", method: "PUT" });
    expect(put).toBe('- - {"digest": "sha1:X", "length": "0", "offset": "0", "filename": "", "requestBody": "a=\\u00e9", "method": "PUT"}\n');
  });
  it("CDX-11: digest without its algorithm, `-` for what is missing", () => {
    expect(formatCdx11(e)).toBe("com,example)/ 20261203105227 http://example.com/ text/html 200 AGQSEBJJDSVCPJ3XUTYD7ADE6QUYZTFW - - 636 871 x.warc.gz\n");
    expect(formatCdx11({ ...e, mime: undefined, status: undefined })).toContain(" http://example.com/ - - AGQS");
  });
  it("JSON strings as Python's ensure_ascii writes them", () => {
    expect(pyJsonString('b=é&a="1"\\')).toBe('"b=\\u00e9&a=\\"1\\"\\\\"');
    expect(pyJsonString("\t\n\r\b\f\x01\x7f")).toBe('"\\t\\n\\r\\b\\f\\u0001\x7f"');
    expect(pyJsonString("😀")).toBe('"\\ud83d\\ude00"');
  });
});

describe("fields", () => {
  it("timestamp: 14 digits of WARC-Date, fractions dropped", () => {
    expect(warcDateToTimestamp("2026-12-03T10:45:06.850113Z")).toBe("20261203104506");
    expect(warcDateToTimestamp("2014-03-25T12:23:41Z")).toBe("20140325122341");
    expect(warcDateToTimestamp("2014-03-25T12:23:41")).toBe("20140325122341");
    // Not the usual form: the digit groups, padded (a seventh seconds digit makes 412 seconds).
    expect(warcDateToTimestamp("2014-03-25T12:23:412Z")).toBe("201403251223412");
    expect(warcDateToTimestamp("2014-03-25 12:23:41Z")).toBe("20140325122341");
    expect(warcDateToTimestamp("2014")).toBe("20140101000000");
    expect(warcDateToTimestamp(null)).toBe("-");
  });
  it("mime: cut at `;` or whitespace; an empty header stays empty", () => {
    expect(mimeValue("text/html; charset=utf-8")).toBe("text/html");
    expect(mimeValue("text/html charset")).toBe("text/html");
    expect(mimeValue("")).toBe("");
    expect(mimeValue(null)).toBeUndefined();
  });
  it("status: the first word after the protocol", () => {
    expect(statusCode("HTTP/1.1 200 OK")).toBe("200");
    expect(statusCode("HTTP/1.0 404")).toBe("404");
    expect(statusCode("HTTP/2 301 Moved")).toBe("301");
  });
});

describe("sorting", () => {
  it("whole lines in code-point order, identical lines once", () => {
    const lines = ["b 1 {}\n", "a 2 {}\n", "a 1 {}\n", "a 1 {}\n", "a 1 {\"x\"}\n"];
    expect(sortLines(lines)).toEqual(["a 1 {\"x\"}\n", "a 1 {}\n", "a 2 {}\n", "b 1 {}\n"]);
  });
  it("code points, not UTF-16 units, beyond U+FFFF", () => {
    expect(compareLines("\u{1F600}\n", "\uFFFF\n")).toBeGreaterThan(0); // JS `<` would say otherwise
  });
});

describe("POST/PUT query (§4)", () => {
  const form = "application/x-www-form-urlencoded";
  it("form bodies: + and %XX decoded, not re-encoded", () => {
    expect(queryFromBody(form, "43", b("name=Lathe+Tester&comment=hello%20world&x=1"))).toBe("name=Lathe Tester&comment=hello world&x=1");
    expect(queryFromBody(form + "; charset=UTF-8", null, b("b=%C3%A9&a=1+2"))).toBe("b=é&a=1 2");
    expect(queryFromBody(form, null, b("a=%FF"))).toBe("a=\ufffd"); // Python's unquote: errors='replace'
  });
  it("form bodies that are not UTF-8 go the binary way", () => {
    expect(queryFromBody(form, null, Buffer.from([0x61, 0x3d, 0xff]))).toBe("__wb_post_data=YT3/");
  });
  it("Content-Length bytes are read; 8192 when absent; null when it does not parse", () => {
    expect(queryFromBody(form, "3", b("a=1&b=2"))).toBe("a=1");
    expect(queryFromBody(form, " 3 ", b("a=1&b=2"))).toBe("a=1");
    expect(queryFromBody(form, "x", b("a=1"))).toBeNull();
    expect(queryFromBody(form, "-1", b("a=1"))).toBe("");
    expect(queryFromBody(form, null, b("a".repeat(9000)))!.length).toBe(4096); // 8192 read, cut to 4096
  });
  it("JSON: scalar leaves, repeated names numbered, Python str() of values", () => {
    expect(queryFromBody("application/json", null, b('{"a":[1,2],"b":{"c":"d"}}'))).toBe("a=1&a.2_=2&c=d");
    expect(queryFromBody("application/json", null, b('{"t":true,"f":false,"n":null,"x":1.0,"y":1e20,"z":-0,"s":"a b/é"}'))).toBe(
      "t=True&f=False&n=None&x=1.0&y=1e%2B20&z=0&s=a+b%2F%C3%A9",
    );
    expect(queryFromBody("application/json", null, b('{"a":1}\n{"a":2}'))).toBe("a=1&a.2_=2"); // JSON Lines
    expect(queryFromBody("application/json", null, b("{not json"))).toBe("");
    expect(queryFromBody("application/json", null, b('"top-level scalar"'))).toBe("");
  });
  it("text/plain: JSON when it parses, else binary", () => {
    expect(queryFromBody("text/plain", null, b('{"q":"x"}'))).toBe("q=x");
    expect(queryFromBody("text/plain", null, b("plain text body"))).toBe("__wb_post_data=cGxhaW4gdGV4dCBib2R5");
    expect(queryFromBody("text/plain", null, b('{"q":"\\ud800"}'))).toBe("__wb_post_data=eyJxIjoiXHVkODAwIn0="); // urlencode raises
    expect(queryFromBody("application/json", null, b('{"q":"\\ud800"}'))).toBe("");
  });
  it("multipart: each part's (name, value), file parts as raw bytes", () => {
    const body =
      "--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHello World\r\n" +
      '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nfile body\r\n--XyZ--\r\n';
    expect(queryFromBody("multipart/form-data; boundary=XyZ", null, b(body))).toBe("title=Hello+World&file=file+body");
    expect(queryFromBody("multipart/form-data", null, b(body))).toMatch(/^__wb_post_data=/); // no boundary
  });
  it("other types (or none): base64 of the raw bytes", () => {
    expect(queryFromBody("application/octet-stream", null, Buffer.from([0, 1, 2, 250]))).toBe("__wb_post_data=AAEC+g==");
    expect(queryFromBody(null, null, b("x"))).toBe("__wb_post_data=eA==");
  });
  it("the key suffix: & after an existing query, the method as sent, the body only for POST/PUT", () => {
    expect(methodQuery("POST", form, null, b("a=1"), "http://h/p?src=form").append).toBe("&__wb_method=POST&a=1");
    expect(methodQuery("PUT", "application/json", null, b('{"k":"v"}'), "http://h/p")).toEqual({ query: "k=v", append: "?__wb_method=PUT&k=v" });
    expect(methodQuery("DELETE", form, null, b("a=1"), "http://h/p")).toEqual({ query: "", append: "?__wb_method=DELETE" });
    expect(methodQuery("post", form, null, b("a=1"), "http://h/p").append).toBe("?__wb_method=post"); // case-sensitive, as the reference
  });
  it("Python quoting helpers", () => {
    expect(quotePlus("a b/~_.-é")).toBe("a+b%2F~_.-%C3%A9");
    expect(unquotePlus("a+b%2B%zz")).toBe("a b+%zz");
  });
  it("Python float str()", () => {
    expect(["1.0", "1e20", "1.5e16", "1e-5", "0.0001", "123.456", "-2.50", "1E400", "3"].map(pyNumberStr)).toEqual([
      "1.0",
      "1e+20",
      "1.5e+16",
      "1e-05",
      "0.0001",
      "123.456",
      "-2.5",
      "inf",
      "3",
    ]);
  });
  it("request bodies are de-chunked and decompressed first (warcio's content_stream)", () => {
    const gz = gzipSync(Buffer.from("a=1&b=2"));
    const chunked = Buffer.concat([Buffer.from(gz.length.toString(16) + "\r\n"), gz, Buffer.from("\r\n0\r\n\r\n")]);
    const headText = "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n";
    const block = Buffer.concat([Buffer.from(headText), chunked]);
    const head = parseHttpHead(block)!;
    expect(requestPayload(block, head).toString()).toBe("a=1&b=2");
  });
});
