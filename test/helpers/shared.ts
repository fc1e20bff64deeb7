/**
 * The team's shared data beside the repository, read in place and never copied:
 * ../shared/conformance (WARCs with their indexes, SURT vectors) and ../shared/spec/examples (the
 * golden WARCs). A clone without ../shared still runs every other test: the groups that read a
 * missing directory are skipped, and one line per missing directory (and test file) says so. When
 * CI is set (non-empty) they fail instead, so a CI run can never lose them without anyone noticing.
 */
import { existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it, TestRunner } from "vitest";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

export interface SharedDir {
  /** Absolute path. */
  readonly path: string;
  /** How the messages name it: `../shared/conformance`, or the environment variable naming it instead. */
  readonly label: string;
  readonly present: boolean;
}

/**
 * `../shared/<sub>` beside the repository (`sub` like "conformance/warcs"), or the directory the
 * environment variable `envVar` names when it is set.
 */
export function sharedDir(sub: string, envVar?: string): SharedDir {
  const instead = envVar ? process.env[envVar] : undefined;
  if (instead) return { path: resolve(instead), label: `the ${envVar} directory`, present: existsSync(instead) };
  const path = join(repoRoot, "..", "shared", ...sub.split("/"));
  return { path, label: `../shared/${sub}`, present: existsSync(path) };
}

const ci = () => (process.env.CI ?? "") !== "";

/** Per missing directory: the groups that need it, how many have been collected, their tests. */
const missing = new Map<string, { groups: number; collected: number; tests: number }>();

/**
 * `describe(name, fn)` for a group whose tests read `dirs`. All present: an ordinary describe.
 * One missing: the group is skipped (its `fn` still runs to list the tests, so anything `fn` reads
 * while listing must not come from the missing directory); under CI a group of the same name comes
 * first whose one test fails naming the directory.
 */
export function describeUsing(dirs: SharedDir | SharedDir[], name: string, fn: () => void): void {
  const absent = (Array.isArray(dirs) ? dirs : [dirs]).filter((d) => !d.present);
  if (absent.length === 0) {
    describe(name, fn);
    return;
  }
  for (const d of absent) {
    const m = missing.get(d.label) ?? { groups: 0, collected: 0, tests: 0 };
    m.groups++;
    missing.set(d.label, m);
  }
  if (ci()) {
    describe(name, () => {
      for (const d of absent) {
        it(`${d.label} is present`, () => {
          throw new Error(`${d.label} is absent (${d.path}): the tests that read it cannot run, and CI is set, so that is a failure, not a skip`);
        });
      }
    });
  }
  describe.skip(name, () => {
    fn();
    const tests = TestRunner.getCurrentSuite().tasks.filter((t) => t.type === "test").length;
    for (const d of absent) noteCollected(d, tests);
  });
}

/**
 * One line per missing directory, once the last group of the file that needs it has been listed
 * (vitest lists the groups declared at the top level in order, before running any). The count is
 * of the tests a group lists itself: a table read from the missing directory lists none.
 */
function noteCollected(d: SharedDir, tests: number): void {
  const m = missing.get(d.label)!;
  m.collected++;
  m.tests += tests;
  if (m.collected < m.groups) return;
  const file = TestRunner.getCurrentSuite().file?.filepath;
  const where = file ? ` in ${relative(repoRoot, file)}` : "";
  const outcome = ci() ? "not run, and CI is set: the run fails" : "skipped";
  const count = m.tests === 1 ? "1 test" : `${m.tests} tests`;
  console.warn(`lathe tests: ${d.label} is absent (${d.path}); ${count}${where} ${outcome}`);
}
