import { describe, expect, it } from "vitest";
import { escapeHelp, escapeLabelValue, formatValue, renderMetrics } from "../../src/control/metrics.js";

describe("renderMetrics (Prometheus text format 0.0.4)", () => {
  it("groups samples by name with one HELP and TYPE, in first-appearance order", () => {
    const text = renderMetrics([
      { name: "lathe_captures_total", help: "Captures written.", type: "counter", labels: { collection: "default" }, value: 3 },
      { name: "lathe_open_sessions", help: "Open sessions.", type: "gauge", value: 1 },
      { name: "lathe_captures_total", help: "Captures written.", type: "counter", labels: { collection: "news" }, value: 10n },
    ]);
    expect(text).toBe(
      "# HELP lathe_captures_total Captures written.\n" +
        "# TYPE lathe_captures_total counter\n" +
        'lathe_captures_total{collection="default"} 3\n' +
        'lathe_captures_total{collection="news"} 10\n' +
        "# HELP lathe_open_sessions Open sessions.\n" +
        "# TYPE lathe_open_sessions gauge\n" +
        "lathe_open_sessions 1\n",
    );
    expect(renderMetrics([])).toBe("");
  });

  it("escapes HELP (\\ and newline) and label values (\\, \" and newline)", () => {
    expect(escapeHelp("a\\b\nc \"q\"")).toBe('a\\\\b\\nc "q"');
    expect(escapeLabelValue('C:\\warcs\n"x"')).toBe('C:\\\\warcs\\n\\"x\\"');
    const text = renderMetrics([{ name: "m", help: "line1\nline2", type: "gauge", labels: { path: 'a"b\\c\nd', n: 2, ok: true }, value: 0.5 }]);
    expect(text).toBe('# HELP m line1\\nline2\n# TYPE m gauge\nm{path="a\\"b\\\\c\\nd",n="2",ok="true"} 0.5\n');
  });

  it("formats special values and timestamps", () => {
    expect(formatValue(NaN)).toBe("NaN");
    expect(formatValue(Infinity)).toBe("+Inf");
    expect(formatValue(-Infinity)).toBe("-Inf");
    expect(formatValue(-0)).toBe("0");
    expect(formatValue(1e21)).toBe("1e+21");
    expect(formatValue(2n ** 64n)).toBe("18446744073709551616");
    expect(renderMetrics([{ name: "t", help: "h", type: "untyped", value: 1, timestampMs: 1700000000000.7 }])).toBe("# HELP t h\n# TYPE t untyped\nt 1 1700000000000\n");
  });

  it("histograms: _bucket (with le), _sum, _count under one family", () => {
    const text = renderMetrics([
      { name: "lathe_fetch_seconds", help: "Fetch durations.", type: "histogram", suffix: "_bucket", labels: { le: 0.1 }, value: 2 },
      { name: "lathe_fetch_seconds", help: "Fetch durations.", type: "histogram", suffix: "_bucket", labels: { le: "+Inf" }, value: 3 },
      { name: "lathe_fetch_seconds", help: "Fetch durations.", type: "histogram", suffix: "_sum", value: 0.42 },
      { name: "lathe_fetch_seconds", help: "Fetch durations.", type: "histogram", suffix: "_count", value: 3 },
    ]);
    expect(text).toBe(
      "# HELP lathe_fetch_seconds Fetch durations.\n# TYPE lathe_fetch_seconds histogram\n" +
        'lathe_fetch_seconds_bucket{le="0.1"} 2\nlathe_fetch_seconds_bucket{le="+Inf"} 3\nlathe_fetch_seconds_sum 0.42\nlathe_fetch_seconds_count 3\n',
    );
  });

  it("refuses invalid names and inconsistent families", () => {
    expect(() => renderMetrics([{ name: "bad-name", help: "", type: "gauge", value: 1 }])).toThrow(/metric name/);
    expect(() => renderMetrics([{ name: "m", help: "", type: "gauge", labels: { "bad-label": "x" }, value: 1 }])).toThrow(/label name/);
    expect(() => renderMetrics([{ name: "m", help: "", type: "gauge", labels: { __reserved: "x" }, value: 1 }])).toThrow(/label name/);
    expect(() =>
      renderMetrics([
        { name: "m", help: "", type: "gauge", value: 1 },
        { name: "m", help: "", type: "counter", value: 1 },
      ]),
    ).toThrow(/two different/);
    expect(() => renderMetrics([{ name: "m", help: "", type: "gauge", suffix: "_sum", value: 1 }])).toThrow(/suffix/);
    expect(() => renderMetrics([{ name: "h", help: "", type: "histogram", suffix: "_bucket", value: 1 }])).toThrow(/le/);
  });
});
