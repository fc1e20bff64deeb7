/**
 * The shape of the code, checked (ARCHITECTURE.md): files small enough to read, functions short
 * enough to hold in one's head, and imports that only run down the layers ARCHITECTURE.md lists.
 * The layer order is read from ARCHITECTURE.md itself, so the document cannot drift from the code.
 */
import { describe, expect, it } from "vitest";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

const root = resolve(import.meta.dirname, "..");
const src = join(root, "src");
const MAX_FILE_LINES = 600;
const MAX_FUNCTION_LINES = 120;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return name.endsWith(".ts") ? [p] : [];
  });
}

const files = sourceFiles(src).map((path) => ({ path, rel: relative(src, path), text: readFileSync(path, "utf8") }));

/** The layer order, top first, from the line of ARCHITECTURE.md that starts with "Layers:". */
function layers(): string[] {
  const doc = readFileSync(join(root, "ARCHITECTURE.md"), "utf8");
  const line = doc.split("\n").find((l) => /^Layers:/.test(l.replace(/^[`*\s]+/, "")));
  if (!line) throw new Error('ARCHITECTURE.md has no line starting with "Layers:"');
  return line.replace(/^[`*\s]*Layers:/, "").replace(/`/g, "").split("→").map((s) => s.trim()).filter(Boolean);
}

/** The layer of a file under src/: its top folder, or its name for a file at the top (main.ts). */
function layerOf(rel: string): string {
  const first = rel.split(sep)[0]!;
  return first.replace(/\.(ts|js)$/, "");
}

describe("the shape of src/", () => {
  it(`no file is over ${MAX_FILE_LINES} lines`, () => {
    const long = files.map((f) => ({ file: f.rel, lines: f.text.split("\n").length })).filter((f) => f.lines > MAX_FILE_LINES);
    expect(long).toEqual([]);
  });

  it(`no function is over ${MAX_FUNCTION_LINES} lines`, () => {
    const long: string[] = [];
    for (const f of files) {
      const sf = ts.createSourceFile(f.path, f.text, ts.ScriptTarget.ES2022, true);
      const visit = (n: ts.Node): void => {
        if (ts.isFunctionLike(n) && "body" in n && n.body) {
          const first = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
          const last = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
          const name = "name" in n && n.name ? n.name.getText(sf) : "(anonymous)";
          if (last - first + 1 > MAX_FUNCTION_LINES) long.push(`${f.rel}:${first + 1} ${name}: ${last - first + 1} lines`);
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(long).toEqual([]);
  });

  it("imports only run down the layers ARCHITECTURE.md lists", () => {
    const order = layers();
    const rank = new Map(order.map((l, i) => [l, i]));
    const upward: string[] = [];
    const unknown = new Set<string>();
    for (const f of files) {
      const from = layerOf(f.rel);
      if (!rank.has(from)) unknown.add(from);
      for (const m of f.text.matchAll(/(?:from|import\()\s*"(\.{1,2}\/[^"]+)"/g)) {
        const to = layerOf(relative(src, resolve(dirname(f.path), m[1]!)));
        if (!rank.has(to)) unknown.add(to);
        else if (to !== from && rank.get(to)! < rank.get(from)!) upward.push(`${f.rel} imports ${m[1]} (${from} → ${to})`);
      }
    }
    expect([...unknown], "layers missing from ARCHITECTURE.md").toEqual([]);
    expect(upward).toEqual([]);
  });

  /**
   * Node 20's V8 builds two kinds of object literal through its runtime on every evaluation: one
   * with properties after a spread (`{ ...o, more }`: ~1 µs per added property, 14 µs for nine)
   * and one with getters or setters (~0.7 µs per accessor); a plain literal or a class instance
   * costs ~30 ns. Issue #25 found ~30 µs of them per exchange. The files every request runs
   * through keep to the fast forms: a literal spelled out, `Object.assign({}, o, more)`, or a class.
   */
  it("the files every exchange runs through build no object literal through V8's runtime", () => {
    const posix = (f: (typeof files)[number]) => f.rel.split(sep).join("/");
    const perExchange = [
      ...files.map(posix).filter((rel) => /^(proxy|capture|upstream)\//.test(rel)),
      "archive/pipeline.ts",
      "archive/dedup.ts",
      "control/liveFeed.ts",
      "index/live.ts",
      "warcprox/stats.ts",
      "warcprox/crawlLog.ts",
    ];
    const slow: string[] = [];
    for (const rel of perExchange) {
      const f = files.find((x) => posix(x) === rel);
      expect(f, `${rel} (listed as per-exchange) exists`).toBeDefined();
      const sf = ts.createSourceFile(f!.path, f!.text, ts.ScriptTarget.ES2022, true);
      const visit = (n: ts.Node): void => {
        if (ts.isObjectLiteralExpression(n)) {
          const at = `${rel}:${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}`;
          const spreadAt = n.properties.findIndex((p) => ts.isSpreadAssignment(p));
          if (spreadAt >= 0 && n.properties.slice(spreadAt + 1).some((p) => !ts.isSpreadAssignment(p))) slow.push(`${at}: properties after a spread`);
          if (n.properties.some((p) => ts.isGetAccessorDeclaration(p) || ts.isSetAccessorDeclaration(p))) slow.push(`${at}: an accessor in a literal`);
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(slow).toEqual([]);
  });
});
