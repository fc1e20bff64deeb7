import { parseArgs } from "node:util";
import { ProxyError } from "../core/errors.js";
import { VERSION } from "../core/version.js";

/**
 * The commands are loaded when run, not all at start: `lathe wacz` or `lathe index` need neither
 * the proxy nor Chromium's driver (playwright-core), and start in a third of the time and ~25 MB
 * less memory. The help, which quotes every command's, loads them all.
 */
async function help(): Promise<string> {
  const [{ SERVE_HELP }, { INDEX_HELP }, { RECORD_HELP }, { WACZ_HELP }] = await Promise.all([import("./serve.js"), import("./index.js"), import("./record.js"), import("./wacz.js")]);
  return `lathe ${VERSION} — archival recording forward proxy

usage:
  lathe serve [--host H] [--port P] [--dir DIR] [--certs DIR] [--config FILE]
  lathe ca [--certs DIR] [--export FILE] [--pem]
  lathe index --dedup-db FILE [--bucket NAME] WARC...
  lathe index --cdxj | --cdx11 [--output FILE] WARC...
  lathe index --merge [--output FILE] INDEX...
  lathe record [URL...] [--collection NAME] [--dir DIR] [--headless] [--urls FILE] [--wacz FILE] ...
  lathe wacz --output FILE.wacz (--collection NAME | --session ID | WARC...)
  lathe --version

${SERVE_HELP}
lathe ca [options]      print the CA certificate path, SHA-256 fingerprint and SPKI hash
  --certs DIR      CA directory (default ./certs)
  --export FILE    write the CA certificate (PEM, never the key) to FILE
  --pem            print the CA certificate (PEM) after the summary

${INDEX_HELP}
${RECORD_HELP}
${WACZ_HELP}`;
}

/** The only place that decides the exit code. */
export async function runCli(argv: string[]): Promise<number> {
  const out = (s: string) => process.stdout.write(s);
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case "serve":
        return await (await import("./serve.js")).serveCommand(rest, out);
      case "ca": {
        const { values } = parseArgs({
          args: rest.map((a) => a),
          options: { certs: { type: "string" }, export: { type: "string" }, pem: { type: "boolean" } },
          strict: true,
          allowPositionals: false,
        });
        const exp = values.export !== undefined ? values.export : values.pem ? true : undefined;
        const { caCommand } = await import("./ca.js");
        return await caCommand({ certs: values.certs ?? "./certs", ...(exp !== undefined ? { export: exp } : {}) }, out);
      }
      case "index":
        return await (await import("./index.js")).indexCommand(rest, out);
      case "record":
        return await (await import("./record.js")).recordCommand(rest, out);
      case "wacz":
        return await (await import("./wacz.js")).waczCommand(rest, out);
      case "--version":
      case "-v":
        out(`${VERSION}\n`);
        return 0;
      case undefined:
      case "help":
      case "--help":
      case "-h":
        out(await help());
        return cmd === undefined ? 2 : 0;
      default:
        process.stderr.write(`lathe: unknown command ${JSON.stringify(cmd)}\n\n${await help()}`);
        return 2;
    }
  } catch (e) {
    if (e instanceof ProxyError) {
      process.stderr.write(`lathe: ${e.message}\n`);
      return e.code === "ERR_CONFIG" ? 2 : 1;
    }
    if (e && typeof e === "object" && "code" in e && String((e as { code: unknown }).code).startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`lathe: ${(e as unknown as Error).message}\n\n${await help()}`);
      return 2;
    }
    process.stderr.write(`lathe: unexpected error: ${(e as Error).stack ?? String(e)}\n`);
    return 1;
  }
}
