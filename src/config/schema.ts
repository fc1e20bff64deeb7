import { POLITENESS_DEFAULTS, type PolitenessPolicy } from "./politeness.js";

/**
 * Every setting lathe has, with its default. `proxy.config.json` mirrors DEFAULTS exactly
 * (a test checks it), and README explains each key.
 */
export interface Config {
  proxy: {
    host: string;
    port: number;
    /** Request header section limit (Node maxHeaderSize); over it the client gets 431. */
    maxHeaderBytes: number;
    headersTimeoutMs: number;
    keepAliveTimeoutMs: number;
    /** A CONNECT tunnel whose TLS handshake has not completed after this is closed. */
    tlsHandshakeTimeoutMs: number;
    /** optional: no credentials → default collection; required: every request authenticates (407). */
    auth: "optional" | "required";
    /** Credentials that select the default collection in `required` mode. */
    defaultUser: string | null;
    defaultPassword: string | null;
    /**
     * Client addresses (CIDR) allowed to connect; others are closed at once. [] = anyone who can
     * reach the address. Binding a non-loopback address needs this or `auth: "required"`.
     */
    allowClients: string[];
    /** Offer HTTP/2 (ALPN `h2`) to clients inside intercepted CONNECT tunnels, beside `http/1.1`. */
    http2: boolean;
  };
  upstream: {
    connectTimeoutMs: number;
    headTimeoutMs: number;
    idleTimeoutMs: number;
    rejectInvalidCerts: boolean;
    /** Extra PEM file of CAs trusted for upstream verification (added to Node's roots). */
    caFile: string | null;
    maxHeaderBytes: number;
    lenientParsing: boolean;
    /** When non-empty, only these hosts (exact, or `*.suffix`) may be contacted; others get 403 before any DNS lookup. */
    allowHosts: string[];
    /** Hosts never contacted (exact, or `*.suffix`); 403 before any DNS lookup. */
    denyHosts: string[];
    maxSocketsPerHost: number;
    /** Addresses (CIDR) never connected to, checked after DNS resolution: 403. Cloud metadata by default. */
    denyAddresses: string[];
    /** Offer HTTP/2 (ALPN `h2`) to origins, beside `http/1.1`; one h2 session per origin. */
    http2: boolean;
  };
  capture: {
    spoolMemoryBytes: number;
    spoolDir: string | null;
    maxBodyBytes: number;
    maxDurationMs: number;
    /**
     * rollover durability: bytes (memory + spool) of captures waiting for a writer that cannot
     * write, past which new exchanges are refused with 503 (the waiting ones are kept).
     */
    retryMaxBytes: number;
    /** rollover durability: how long a capture may wait for its writer before new exchanges are refused with 503. */
    retryMaxMs: number;
  };
  warc: {
    dir: string;
    prefix: string;
    filenameTemplate: string;
    version: "1.0" | "1.1";
    /**
     * `gzip` (`.warc.gz`), `none` (`.warc`), or `hybrid`: already-compressed payloads to a `.warc`
     * series beside the `.warc.gz` one (issue #24). Set from `gzip` when only that is given.
     */
    compression: "gzip" | "none" | "hybrid";
    /** The older switch, an alias: true = `gzip`, false = `none`; after resolution, compression is not `none`. */
    gzip: boolean;
    /** hybrid: payloads under this many bytes stay in the gzip series (their headers dominate). */
    hybridMinPayloadBytes: number;
    gzipLevel: number;
    gzipSkipLength: boolean;
    maxFileBytes: number;
    idleRolloverMs: number;
    digest: "sha1" | "sha256";
    chunked: "dechunk" | "wire-exact";
    durability: "rollover" | "strict";
  };
  warcinfo: {
    operator: string;
    description: string;
    isPartOf: string;
    robots: string;
    httpHeaderUserAgent: string;
    httpHeaderFrom: string;
    extra: Record<string, string>;
  };
  certs: {
    dir: string;
    leafCacheSize: number;
  };
  control: {
    /** Address of the REST control API; loopback unless a token is set. */
    host: string;
    /** 0 picks a free port; -1 disables the control API. */
    port: number;
    /** Bearer token the API requires (also from LATHE_CONTROL_TOKEN); null = none (loopback only). */
    token: string | null;
  };
  dedup: {
    /** off | digest (any earlier capture with the payload) | url (same URL only) | url-preferred. */
    policy: "off" | "digest" | "url" | "url-preferred";
    /** SQLite file; null = `lathe-dedup.sqlite3` in the WARC directory. */
    dbPath: string | null;
    /** Buckets looked up in order; `rw` ones also get new entries, `ro` ones are only read. */
    buckets: Array<{ name: string; mode: "rw" | "ro" }>;
    /** Minimum payload bytes for a capture to be deduplicated, for text and binary types. */
    minBytes: { text: number; binary: number };
    /** Status codes that qualify: exact codes ("200") or classes ("2xx"). */
    statuses: string[];
    /** How long a capture waits for an identical payload still being written. */
    inflightWaitMs: number;
    /** Record a 304 to a conditional request as a server-not-modified revisit when possible. */
    serverNotModified: boolean;
  };
  log: {
    level: "debug" | "info" | "warn" | "error";
    json: boolean;
    /** Heritrix-format crawl logs, one per WARC prefix; null = the WARC directory, "" = none. */
    crawlLogDir: string | null;
  };
  /** State shared by a fleet of instances (issue "A fleet… sharing PostgreSQL"). */
  shared: {
    /**
     * `postgresql://user:password@host:port/db` (also LATHE_POSTGRESQL, --postgresql): dedup
     * entries, Warcprox-Meta stats and limits and the instance registry live there; null = the
     * embedded SQLite store, nothing shared.
     */
    postgresql: string | null;
    /** This instance's id in the registry; null = `<hostname>:<proxy port>`. */
    instanceId: string | null;
    /** Registry heartbeat interval; an instance silent for 3 intervals is dropped. */
    heartbeatMs: number;
    /** Bytes of dedup entries kept on disk while the server is away (then further ones are dropped, logged). */
    outboxMaxBytes: number;
  };
  /** The default collection's politeness policy (issue #27); other collections have their own. */
  politeness: PolitenessPolicy;
}

export const DEFAULTS: Config = {
  proxy: {
    host: "127.0.0.1",
    port: 8000,
    maxHeaderBytes: 8 * 1024 * 1024,
    headersTimeoutMs: 30_000,
    keepAliveTimeoutMs: 60_000,
    tlsHandshakeTimeoutMs: 30_000,
    auth: "optional",
    defaultUser: null,
    defaultPassword: null,
    allowClients: [],
    http2: true,
  },
  upstream: {
    connectTimeoutMs: 30_000,
    headTimeoutMs: 60_000,
    idleTimeoutMs: 120_000,
    rejectInvalidCerts: false,
    caFile: null,
    maxHeaderBytes: 1024 * 1024,
    lenientParsing: false,
    allowHosts: [],
    denyHosts: [],
    maxSocketsPerHost: 64,
    // Cloud metadata services: AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle (169.254.169.254),
    // AWS ECS task metadata (169.254.170.2), Alibaba (100.100.100.200), AWS IPv6 (fd00:ec2::254),
    // GCP IPv6 (fd20:ce::254).
    denyAddresses: ["169.254.169.254/32", "169.254.170.2/32", "100.100.100.200/32", "fd00:ec2::254/128", "fd20:ce::254/128"],
    http2: true,
  },
  capture: {
    spoolMemoryBytes: 1024 * 1024,
    spoolDir: null,
    maxBodyBytes: 0,
    maxDurationMs: 1_200_000,
    retryMaxBytes: 64 * 1024 * 1024,
    retryMaxMs: 60_000,
  },
  warc: {
    dir: "./warcs",
    prefix: "lathe",
    filenameTemplate: "{prefix}-{timestamp17}-{serial}-{hostname}",
    version: "1.1",
    compression: "gzip",
    gzip: true,
    // Measured with scripts/bench-hybrid.mjs (README "Hybrid compression").
    hybridMinPayloadBytes: 64 * 1024,
    gzipLevel: 6,
    gzipSkipLength: false,
    maxFileBytes: 1_000_000_000,
    idleRolloverMs: 600_000,
    digest: "sha1",
    chunked: "dechunk",
    durability: "rollover",
  },
  warcinfo: {
    operator: "",
    description: "",
    isPartOf: "",
    robots: "",
    httpHeaderUserAgent: "",
    httpHeaderFrom: "",
    extra: {},
  },
  certs: {
    dir: "./certs",
    leafCacheSize: 10_000,
  },
  control: {
    host: "127.0.0.1",
    port: 8001,
    token: null,
  },
  dedup: {
    policy: "digest",
    dbPath: null,
    buckets: [{ name: "default", mode: "rw" }],
    minBytes: { text: 1, binary: 1 },
    statuses: ["2xx"],
    inflightWaitMs: 5000,
    serverNotModified: true,
  },
  log: {
    level: "info",
    json: false,
    crawlLogDir: null,
  },
  shared: {
    postgresql: null,
    instanceId: null,
    heartbeatMs: 5000,
    outboxMaxBytes: 256 * 1024 * 1024,
  },
  politeness: structuredClone(POLITENESS_DEFAULTS),
};

/** Deep partial, what a config file or the CLI supplies. */
export type ConfigInput = { [S in keyof Config]?: Partial<Config[S]> };
