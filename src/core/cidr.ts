/**
 * IP addresses and CIDR blocks, as the settings name them (`proxy.allowClients`,
 * `upstream.denyAddresses`): parsed once when the config is validated, matched on every
 * connection. Pure: node:net's address helpers only.
 */
import net from "node:net";

export interface Cidr {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/** `a.b.c.d/n`, `x::y/n` or a bare address (a /32 or /128); null if it is none of these. */
export function parseCidr(s: string): Cidr | null {
  const m = /^([^/]+?)(?:\/(\d{1,3}))?$/.exec(s.trim());
  if (!m) return null;
  const address = m[1]!.replace(/^\[|\]$/g, "");
  const v = net.isIP(address);
  if (v === 0) return null;
  const max = v === 4 ? 32 : 128;
  const prefix = m[2] === undefined ? max : Number(m[2]);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) return null;
  return { address, prefix, family: v === 4 ? "ipv4" : "ipv6" };
}

/** An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) as the IPv4 address it stands for. */
export function plainIp(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return m ? m[1]! : ip;
}

/** A matcher for a list of CIDRs (already validated by the config). */
export function cidrMatcher(list: readonly string[]): (ip: string) => boolean {
  const bl = new net.BlockList();
  for (const s of list) {
    const c = parseCidr(s);
    if (c) bl.addSubnet(c.address, c.prefix, c.family);
  }
  return (ip: string) => {
    const a = plainIp(ip);
    const v = net.isIP(a);
    if (v === 0) return false;
    return bl.check(a, v === 4 ? "ipv4" : "ipv6");
  };
}

