/**
 * Where lathe may connect to (README "Security"): never to one of its own listening sockets (a
 * request loop), never to an address in `upstream.denyAddresses` (cloud metadata services by
 * default). Checked on the address actually connected to: IP literals directly, host names on
 * every address DNS returns, just before the connection is made — so a name that resolves to a
 * denied address is refused too.
 */
import dns from "node:dns";
import net from "node:net";
import os from "node:os";
import { ProxyError } from "../core/errors.js";
import { cidrMatcher, plainIp } from "../core/cidr.js";

/** A refused destination: 403 for the deny-list, 508 Loop Detected for lathe's own sockets. */
export class DestinationRefused extends ProxyError {
  readonly status: 403 | 508;
  constructor(status: 403 | 508, message: string) {
    super("ERR_DENIED", message);
    this.status = status;
  }
}

export function isLoopback(ip: string): boolean {
  const a = plainIp(ip);
  return /^127\./.test(a) || a === "::1";
}

function isUnspecified(ip: string): boolean {
  const a = plainIp(ip);
  return a === "0.0.0.0" || a === "::";
}

function sameIp(a: string, b: string): boolean {
  const x = plainIp(a);
  const y = plainIp(b);
  if (x === y) return true;
  // Normalise IPv6 spellings (e.g. 0:0::1 vs ::1) through a BlockList of one address.
  if (net.isIP(x) === 6 && net.isIP(y) === 6) {
    const bl = new net.BlockList();
    bl.addAddress(x, "ipv6");
    return bl.check(y, "ipv6");
  }
  return false;
}

/** Is `ip` an address of this machine (loopback, unspecified, or any interface's)? */
function isLocal(ip: string): boolean {
  if (isLoopback(ip) || isUnspecified(ip)) return true;
  for (const list of Object.values(os.networkInterfaces())) {
    for (const i of list ?? []) if (sameIp(i.address, ip)) return true;
  }
  return false;
}

export interface Endpoint {
  address: string;
  port: number;
}

export interface DestinationGuardOptions {
  /** CIDRs never connected to (`upstream.denyAddresses`). */
  denyAddresses: readonly string[];
  /** lathe's own listening sockets right now (proxy, session and control ports). */
  ownEndpoints: () => Endpoint[];
  /** The resolver (default dns.lookup); tests inject one to point a name anywhere. */
  lookup?: typeof dns.lookup;
}

export interface DestinationGuard {
  /** Why connecting to ip:port is refused, or null. `host` is the name asked for (messages only). */
  check(ip: string, port: number, host?: string): DestinationRefused | null;
  /** A `lookup` for net/tls.connect that refuses a name resolving to a refused address. */
  lookupFor(port: number): net.LookupFunction;
}

export function createDestinationGuard(o: DestinationGuardOptions): DestinationGuard {
  const denied = memoized(cidrMatcher(o.denyAddresses));
  const resolve = o.lookup ?? dns.lookup;
  const check = (ip: string, port: number, host = ip): DestinationRefused | null => {
    const via = host === ip ? ip : `${host} (${ip})`;
    for (const e of o.ownEndpoints()) {
      if (e.port !== port) continue;
      // A socket bound to 0.0.0.0 or :: is reached through any local address; one bound to a
      // specific address through that address, and through 0.0.0.0 (Linux connects it locally).
      if (isUnspecified(e.address) ? isLocal(ip) : sameIp(e.address, ip) || isUnspecified(ip)) {
        return new DestinationRefused(508, `${via}:${port} is lathe itself (a request loop); the request was not sent`);
      }
    }
    if (denied(ip)) {
      return new DestinationRefused(403, `${via} is in upstream.denyAddresses (cloud metadata and other protected addresses); the request was not sent`);
    }
    return null;
  };
  return {
    check,
    lookupFor(port) {
      return ((hostname: string, options: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
        resolve(hostname, Object.assign({}, options, { all: true }), (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => {
          if (err) return cb(err);
          const list = Array.isArray(address) ? address : [{ address, family: family ?? net.isIP(address) }];
          // Refused if any address is: the connection could go to any of them.
          for (const a of list) {
            const refused = check(a.address, port, hostname);
            if (refused) return cb(refused);
          }
          if (options.all) return cb(null, list);
          if (list.length === 0) return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", hostname }));
          cb(null, list[0]!.address, list[0]!.family);
        });
      }) as unknown as net.LookupFunction;
    },
  };
}

/**
 * The deny-list's answer per address, remembered: node:net's BlockList builds a SocketAddress
 * per check, once per exchange to an IP literal (a crawler working from addresses; #25). The
 * list never changes while lathe runs; the memo is cleared when full, so it stays small.
 */
function memoized(match: (ip: string) => boolean, max = 1024): (ip: string) => boolean {
  const known = new Map<string, boolean>();
  return (ip) => {
    let v = known.get(ip);
    if (v === undefined) {
      if (known.size >= max) known.clear();
      known.set(ip, (v = match(ip)));
    }
    return v;
  };
}

/** The guard when none is configured (tests that build a connector directly). */
export const NO_GUARD: DestinationGuard = {
  check: () => null,
  lookupFor: () => dns.lookup as unknown as net.LookupFunction,
};
