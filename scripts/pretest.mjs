#!/usr/bin/env node
// `npm test` runs this first (package.json "pretest"): the suite drives real clients (Debian
// Chromium, curl, wget, openssl, a Java client) and starts its own PostgreSQL server (Debian's
// `postgresql`: initdb and pg_ctl under /usr/lib/postgresql/<version>/bin), so they must be
// installed. Quiet when they are.
// Missing ones are installed with apt-get when running as root (CI, containers); otherwise this
// prints the exact apt-get command and exits 1. Node built-ins only: runs before `npm ci` matters.
import { spawnSync } from "node:child_process";
import { accessSync, constants, readdirSync } from "node:fs";
import { delimiter, join } from "node:path";

/** tool → how it is found, and the Debian package that provides it. */
const TOOLS = [
  { tool: "chromium", path: "/usr/bin/chromium", pkg: "chromium" },
  { tool: "curl", pkg: "curl" },
  { tool: "wget", pkg: "wget" },
  { tool: "openssl", pkg: "openssl" },
  { tool: "java", pkg: "default-jdk-headless" },
  { tool: "javac", pkg: "default-jdk-headless" },
  { tool: "pg_ctl", paths: postgresBinaries("pg_ctl"), pkg: "postgresql" },
  { tool: "initdb", paths: postgresBinaries("initdb"), pkg: "postgresql" },
];

/** Debian keeps PostgreSQL's server programs out of PATH, one directory per major version. */
function postgresBinaries(name) {
  const root = "/usr/lib/postgresql";
  return () => {
    try {
      return readdirSync(root).map((v) => join(root, v, "bin", name));
    } catch {
      return [];
    }
  };
}

const executable = (file) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

function found(t) {
  if (t.path) return executable(t.path);
  if (t.paths) return t.paths().some(executable);
  return (process.env.PATH ?? "").split(delimiter).some((dir) => dir && executable(join(dir, t.tool)));
}

const missing = () => TOOLS.filter((t) => !found(t));
const packagesOf = (ts) => [...new Set(ts.map((t) => t.pkg))];
const describe = (ts) => ts.map((t) => t.path ?? (t.paths ? `/usr/lib/postgresql/*/bin/${t.tool}` : t.tool)).join(", ");

function run(cmd, args) {
  process.stderr.write(`pretest: ${cmd} ${args.join(" ")}\n`);
  const r = spawnSync(cmd, args, { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  if (r.error) throw new Error(`cannot run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited with ${r.status ?? r.signal}`);
}

const lacking = missing();
if (lacking.length === 0) process.exit(0);

const pkgs = packagesOf(lacking);
const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
if (!isRoot) {
  process.stderr.write(`lathe tests need tools that are not installed: ${describe(lacking)}\n`);
  process.stdout.write(`lathe tests need: apt-get install -y ${pkgs.join(" ")}\n`);
  process.exit(1);
}

process.stderr.write(`pretest: installing what the tests need (${describe(lacking)}): ${pkgs.join(" ")}\n`);
try {
  run("apt-get", ["update"]);
  run("apt-get", ["install", "-y", "--no-install-recommends", ...pkgs]);
} catch (e) {
  process.stderr.write(`pretest: ${e.message}\nlathe tests need: apt-get install -y ${pkgs.join(" ")}\n`);
  process.exit(1);
}
const still = missing();
if (still.length > 0) {
  process.stderr.write(`pretest: still missing after apt-get install: ${describe(still)}\n`);
  process.exit(1);
}
