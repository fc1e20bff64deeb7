/**
 * The argument parsing every file-handling command shares: strict flags, positionals allowed,
 * `--help` printing the help, and a usage error (exit status 2) that repeats the help.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { errorMessage } from "../core/errors.js";

export interface CommandArgs {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  /** Report a usage error on stderr with the help; returns the exit status 2. */
  usage(msg: string): number;
}

/** Parse `argv` for `lathe <name>`; an exit status instead when it was `--help` (0) or a usage error (2). */
export function commandArgs(name: string, help: string, argv: string[], options: NonNullable<ParseArgsConfig["options"]>, out: (s: string) => void, err: (s: string) => void): CommandArgs | number {
  const usage = (msg: string) => {
    err(`lathe ${name}: ${msg}\n\n${help}`);
    return 2;
  };
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: "boolean", short: "h" } }, strict: true, allowPositionals: true }) as typeof parsed;
  } catch (e) {
    return usage(errorMessage(e));
  }
  if (parsed.values.help) {
    out(help);
    return 0;
  }
  return { ...parsed, usage };
}
