/**
 * Chromium's own service endpoints (decisions.md §9): refused by the recording session before
 * DNS, so they are never recorded and never leave the machine. The launch flags
 * (`--disable-background-networking`, `--disable-component-update`, `--disable-sync`, …) already
 * switch most of this traffic off; this list catches what still slips through.
 *
 * Only hosts that serve the browser itself are listed. Hosts that web pages load from are left
 * out on purpose, even when Chromium also uses them, because refusing them would break the
 * pages being recorded:
 * - `*.gstatic.com` (fonts.gstatic.com, www.gstatic.com, ssl.gstatic.com: page assets),
 * - `*.googleapis.com` as a whole (fonts, ajax, maps, storage, www.googleapis.com APIs called by
 *   page scripts), `translate.googleapis.com` (the website translate widget),
 * - `www.google.com`, `clients1.google.com` (search suggestions in pages), `dl.google.com`
 *   (downloads a person may click).
 *
 * One exception costs something: `accounts.google.com`. Chromium's IdentityManager POSTs
 * `/ListAccounts?…&source=ChromiumBrowser` for every regular profile at startup and again when
 * Google cookies change (seen with Debian Chromium 156 under playwright-core: five times in
 * 90 s), carrying the profile's Google cookies. No flag or preference turns it off
 * (`signin.allowed: false` in the profile has no effect; chromiumembedded/cef#4276), and lathe's
 * refusal works per host, so the whole host is refused: Google sign-in, and "Sign in with
 * Google" widgets on recorded pages, do not work in a recording session.
 */
export interface DeniedHost {
  /** Exact host, or `*.suffix` (the suffix itself and every subdomain). */
  pattern: string;
  why: string;
}

export const CHROMIUM_SERVICE_HOSTS: readonly DeniedHost[] = [
  { pattern: "update.googleapis.com", why: "component updater and browser update checks (Omaha); sent even with --disable-component-update" },
  { pattern: "accounts.google.com", why: "the browser's own /ListAccounts (cookie-jar account list), which no flag turns off" },
  { pattern: "clients2.google.com", why: "component and extension update checks (/service/update2)" },
  { pattern: "clients2.googleusercontent.com", why: "extension (CRX) downloads" },
  { pattern: "*.gvt1.com", why: "component downloads (redirector.gvt1.com, edgedl.me.gvt1.com: CRLSet, Widevine, models)" },
  { pattern: "*.gvt2.com", why: "Domain Reliability beacons and network probes" },
  { pattern: "clientservices.googleapis.com", why: "field-trial (variations) seed" },
  { pattern: "safebrowsing.googleapis.com", why: "Safe Browsing list updates and lookups" },
  { pattern: "safebrowsingohttpgateway.googleapis.com", why: "Safe Browsing real-time lookups (OHTTP)" },
  { pattern: "sb-ssl.google.com", why: "Safe Browsing (legacy endpoint)" },
  { pattern: "optimizationguide-pa.googleapis.com", why: "Optimization Guide hints and model downloads" },
  { pattern: "content-autofill.googleapis.com", why: "autofill server" },
  { pattern: "passwordsleakcheck-pa.googleapis.com", why: "password leak check" },
  { pattern: "translate-pa.googleapis.com", why: "the browser's built-in page translation" },
  { pattern: "clients4.google.com", why: "sync server (/chrome-sync)" },
  { pattern: "chromesyncpasswords-pa.googleapis.com", why: "password sync" },
  { pattern: "oauthaccountmanager.googleapis.com", why: "browser sign-in token exchange" },
  { pattern: "android.clients.google.com", why: "GCM check-in and registration (push messaging)" },
  { pattern: "mtalk.google.com", why: "GCM/FCM push connection" },
];

/** The patterns, as the session's `denyHosts` takes them. */
export const chromiumServiceHosts = (): string[] => CHROMIUM_SERVICE_HOSTS.map((h) => h.pattern);
