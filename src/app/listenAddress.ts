import type { AddressInfo } from "node:net";

/** `host:port` of a listening socket, as a URL writes it (an IPv6 address in brackets). */
export function hostPortOf(a: AddressInfo): string {
  const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
  return `${host}:${a.port}`;
}
