// A private PostgreSQL server for one test file or one benchmark run: Debian's `postgresql`
// programs (initdb, pg_ctl) run into a temporary directory, listening on 127.0.0.1 at a free
// port, stopped and removed by `destroy()`. PostgreSQL refuses to run as root, so under root (CI)
// the programs run as the unprivileged `postgres` user the package creates, owning the data
// directory. test/helpers/postgres.ts is the tests' typed door to this file (types:
// postgres.d.mts); scripts/bench-postgres.mjs uses it directly.
//
// Durability is off (fsync, full_page_writes, synchronous_commit): the tests measure lathe, not
// the disk, and a test server never outlives its test file.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort } from "./servers.mjs";

export { freePort };

export const ADMIN_USER = "lathe_admin";
export const ADMIN_PASSWORD = "pg-admin-secret";

/** The directory holding initdb and pg_ctl: the newest /usr/lib/postgresql/<version>/bin. */
export function postgresBinDir() {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, "bin", "pg_ctl"))) : [];
  versions.sort((a, b) => Number(b) - Number(a));
  if (versions.length === 0) {
    throw new Error("PostgreSQL's server programs are not installed (no /usr/lib/postgresql/*/bin/pg_ctl): apt-get install -y postgresql (npm test's pretest does this when run as root)");
  }
  return join(root, versions[0], "bin");
}

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0;

function postgresIds() {
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/** Run one of PostgreSQL's programs, as `postgres` when we are root; throws with its output on failure. */
function runPg(bin, program, args) {
  const file = join(bin, program);
  const [cmd, argv] = isRoot() ? ["runuser", ["-u", "postgres", "--", file, ...args]] : [file, args];
  const r = spawnSync(cmd, argv, { encoding: "utf8", cwd: tmpdir() });
  if (r.status !== 0) throw new Error(`${program} ${args.join(" ")} failed (${r.status ?? r.signal}): ${r.stderr || r.stdout}`);
}

/** `settings`: more server settings (name → value), e.g. { shared_buffers: "1GB" } for a benchmark. */
export async function startPostgres({ settings = {} } = {}) {
  const bin = postgresBinDir();
  const home = mkdtempSync(join(tmpdir(), "lathe-pg-"));
  const dataDir = join(home, "data");
  const pwFile = join(home, "pw");
  writeFileSync(pwFile, ADMIN_PASSWORD + "\n");
  if (isRoot()) {
    const { uid, gid } = postgresIds();
    chownSync(home, uid, gid);
    chownSync(pwFile, uid, gid);
  }
  chmodSync(home, 0o700);
  runPg(bin, "initdb", ["-D", dataDir, "-U", ADMIN_USER, `--pwfile=${pwFile}`, "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync", "--no-instructions"]);
  const port = await freePort();
  const extra = Object.entries(settings).map(([k, v]) => ` -c ${k}=${v}`).join("");
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${home} -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200${extra}`;
  const start = () => runPg(bin, "pg_ctl", ["-D", dataDir, "-l", join(home, "log"), "-o", options, "-w", "-t", "60", "start"]);
  const stop = () => runPg(bin, "pg_ctl", ["-D", dataDir, "-m", "fast", "-w", "-t", "60", "stop"]);
  start();

  const url = (db = "postgres", user = ADMIN_USER, password = ADMIN_PASSWORD) =>
    `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(db)}`;
  const query = async (sql, params = [], db = "postgres") => {
    const c = new pg.Client({ connectionString: url(db) });
    await c.connect();
    try {
      return (await c.query(sql, params)).rows;
    } finally {
      await c.end();
    }
  };
  let databases = 0;
  let running = true;
  return {
    port,
    dataDir,
    url,
    query,
    async createDatabase(name = `lathe_test_${++databases}`) {
      await query(`CREATE DATABASE "${name}"`);
      return url(name);
    },
    stop() {
      if (running) stop();
      running = false;
    },
    start() {
      if (!running) start();
      running = true;
    },
    destroy() {
      try {
        if (running) stop();
      } finally {
        running = false;
        rmSync(home, { recursive: true, force: true });
      }
    },
  };
}
