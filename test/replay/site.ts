/**
 * A small multi-page site to record and then replay (issue #23): an HTTPS origin with three
 * pages sharing one stylesheet, PNG/JPEG/SVG images of known natural sizes, a script that
 * fetch()es a JSON file and writes it into the page, two URLs with the same image payload (the
 * second is recorded as a revisit of the first), and a page on a plain-HTTP origin that uses the
 * HTTPS origin's stylesheet.
 *
 * Every response says `Cache-Control: no-store`, so the recording browser fetches the shared
 * stylesheet, logo and JSON again on each page: those later captures are same-URL revisits too.
 *
 * `pages` says what each page must show once replayed (PageExpectation): its text, every image
 * with its natural size, computed styles only the stylesheet gives, and the JSON the script wrote.
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { deflateSync, crc32 } from "node:zlib";
import type { OriginCerts } from "../helpers/certs.js";
import type { PageExpectation } from "../helpers/replay.js";

export interface Site {
  https: string;
  http: string;
  /** Ports of the two origins (a replay test holds them with a tripwire once they stop). */
  ports: number[];
  pages: PageExpectation[];
  /** The URL recorded as a revisit of another URL's identical payload, and that other URL. */
  revisit: { url: string; original: string };
  close(): Promise<void>;
}

// A 41×29 baseline JPEG (Chromium's canvas encoder, quality 0.4): two coloured rectangles.
const JPEG = Buffer.from(
  "/9j/4AAQSkZJRgABAQAAAQABAAD/4gHYSUNDX1BST0ZJTEUAAQEAAAHIAAAAAAQwAABtbnRyUkdCIFhZWiAH4AABAAEAAAAAAABhY3NwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAA9tYAAQAAAADTLQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAlkZXNjAAAA8AAAACRyWFlaAAABFAAAABRnWFlaAAABKAAAABRiWFlaAAABPAAAABR3dHB0AAABUAAAABRyVFJDAAABZAAAAChnVFJDAAABZAAAAChiVFJDAAABZAAAAChjcHJ0AAABjAAAADxtbHVjAAAAAAAAAAEAAAAMZW5VUwAAAAgAAAAcAHMAUgBHAEJYWVogAAAAAAAAb6IAADj1AAADkFhZWiAAAAAAAABimQAAt4UAABjaWFlaIAAAAAAAACSgAAAPhAAAts9YWVogAAAAAAAA9tYAAQAAAADTLXBhcmEAAAAAAAQAAAACZmYAAPKnAAANWQAAE9AAAApbAAAAAAAAAABtbHVjAAAAAAAAAAEAAAAMZW5VUwAAACAAAAAcAEcAbwBvAGcAbABlACAASQBuAGMALgAgADIAMAAxADb/2wBDABQODxIPDRQSEBIXFRQYHjIhHhwcHj0sLiQySUBMS0dARkVQWnNiUFVtVkVGZIhlbXd7gYKBTmCNl4x9lnN+gXz/2wBDARUXFx4aHjshITt8U0ZTfHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHx8fHz/wAARCAAdACkDASIAAhEBAxEB/8QAGAABAQEBAQAAAAAAAAAAAAAAAAUEBgP/xAAqEAABAAcECwAAAAAAAAAAAAAAAQMEERIVolNj0eECBRMUISIxQUOCwf/EABgBAAMBAQAAAAAAAAAAAAAAAAIDBAEF/8QAHREAAgIDAAMAAAAAAAAAAAAAAgMAAQQREiExQf/aAAwDAQACEQMRAD8A0GWYM1rSnA1HNE2KgXb6+SlzLDWpbmDNa0pwPVS0Kl79lpRQ9eCUHPlLU/m9fo5+IC12VXcBbiIqq5TABzZVBMlN9RmUwNW4174uAQCfuTJTfUZmljZN1j544ndnONQCPIaY8lfiYKgG91UAARGT/9k=",
  "base64",
);
export const JPEG_SIZE = { width: 41, height: 29 };

function pngChunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "latin1"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/** An RGB PNG of the given size, a diagonal colour gradient (so each size gives other bytes). */
export function png(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, no interlace
  const raw = Buffer.alloc(height * (1 + width * 3));
  for (let y = 0; y < height; y++) {
    const row = y * (1 + width * 3);
    for (let x = 0; x < width; x++) raw.set([(x * 255) / width, (y * 255) / height, 128], row + 1 + x * 3);
  }
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, pngChunk("IHDR", ihdr), pngChunk("IDAT", deflateSync(raw)), pngChunk("IEND", Buffer.alloc(0))]);
}

const svg = (w: number, h: number) => `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}"><rect width="${w}" height="${h}" fill="teal"/></svg>`;

const STYLE = `body { color: rgb(12, 34, 56); }
h1 { color: rgb(200, 10, 20); letter-spacing: 3px; }
.note { border-left: 7px solid rgb(0, 128, 0); }
`;
const MESSAGE = "fetched JSON says the archive works";

const page = (title: string, body: string, css = "/style.css") =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title><link rel="stylesheet" href="${css}"></head><body>${body}</body></html>`;

type Route = { type: string; body: string | Buffer };

function httpsRoutes(): Record<string, Route> {
  const html = "text/html; charset=utf-8";
  return {
    "/": {
      type: html,
      body: page(
        "Lathe replay: home",
        `<h1>Home of the replay site</h1><p class="note">The home page has a logo and a photo.</p>
<img id="logo" src="/img/logo.png" alt="logo"><img id="photo" src="/img/photo.jpg" alt="photo">
<p>Data: <span id="data">not fetched</span></p><script src="/app.js"></script>`,
      ),
    },
    "/about.html": {
      type: html,
      body: page("Lathe replay: about", `<h1>About this site</h1><p class="note">An SVG icon lives here.</p><img id="icon" src="/img/icon.svg" alt="icon">`),
    },
    "/gallery.html": {
      type: html,
      body: page(
        "Lathe replay: gallery",
        `<h1>Gallery</h1><p class="note">The same photo under another name, and the logo again.</p>
<img id="copy" src="/img/photo-copy.jpg" alt="copy"><img id="logo" src="/img/logo.png" alt="logo">
<p>Data again: <span id="data">not fetched</span></p><script src="/app.js"></script>`,
      ),
    },
    "/style.css": { type: "text/css", body: STYLE },
    "/app.js": {
      type: "application/javascript",
      body: `fetch('/data.json').then((r) => r.json()).then((d) => { document.getElementById('data').textContent = d.message; }).catch((e) => { document.getElementById('data').textContent = 'fetch failed: ' + e; });`,
    },
    "/data.json": { type: "application/json", body: JSON.stringify({ message: MESSAGE }) },
    "/img/logo.png": { type: "image/png", body: png(37, 23) },
    "/img/photo.jpg": { type: "image/jpeg", body: JPEG },
    "/img/photo-copy.jpg": { type: "image/jpeg", body: JPEG },
    "/img/icon.svg": { type: "image/svg+xml", body: svg(53, 17) },
  };
}

function httpRoutes(httpsOrigin: string): Record<string, Route> {
  return {
    "/plain.html": {
      type: "text/html; charset=utf-8",
      body: page("Lathe replay: plain HTTP", `<h1>A page over plain HTTP</h1><p class="note">Its stylesheet comes from the HTTPS origin.</p><img id="dot" src="/img/dot.png" alt="dot">`, `${httpsOrigin}/style.css`),
    },
    "/img/dot.png": { type: "image/png", body: png(19, 7) },
  };
}

function serve(routes: () => Record<string, Route>) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const r = routes()[path];
    if (!r) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
      return;
    }
    res.writeHead(200, { "Content-Type": r.type, "Content-Length": Buffer.byteLength(r.body), "Cache-Control": "no-store" });
    res.end(r.body);
  };
}

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

const stop = (server: http.Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

const NOTE = { selector: ".note", property: "border-left-color", value: "rgb(0, 128, 0)" };
const H1 = { selector: "h1", property: "color", value: "rgb(200, 10, 20)" };

export async function startReplaySite(certs: OriginCerts): Promise<Site> {
  let secureOrigin = "";
  const secure = https.createServer({ key: certs.key, cert: certs.cert }, serve(httpsRoutes));
  const plain = http.createServer(serve(() => httpRoutes(secureOrigin)));
  const [sp, pp] = [await listen(secure), await listen(plain)];
  secureOrigin = `https://127.0.0.1:${sp}`;
  const plainOrigin = `http://127.0.0.1:${pp}`;
  const logo = { width: 37, height: 23 };
  const fetched = { selector: "#data", text: MESSAGE };
  const pages: PageExpectation[] = [
    { url: `${secureOrigin}/`, title: "Lathe replay: home", texts: ["Home of the replay site", "a logo and a photo"], images: { logo, photo: JPEG_SIZE }, styles: [H1, NOTE], fetched },
    { url: `${secureOrigin}/about.html`, title: "Lathe replay: about", texts: ["About this site", "An SVG icon lives here."], images: { icon: { width: 53, height: 17 } }, styles: [H1, NOTE] },
    { url: `${secureOrigin}/gallery.html`, title: "Lathe replay: gallery", texts: ["Gallery", "the logo again"], images: { copy: JPEG_SIZE, logo }, styles: [H1, NOTE], fetched },
    { url: `${plainOrigin}/plain.html`, title: "Lathe replay: plain HTTP", texts: ["A page over plain HTTP", "from the HTTPS origin"], images: { dot: { width: 19, height: 7 } }, styles: [H1, NOTE] },
  ];
  return {
    https: secureOrigin,
    http: plainOrigin,
    ports: [sp, pp],
    pages,
    revisit: { url: `${secureOrigin}/img/photo-copy.jpg`, original: `${secureOrigin}/img/photo.jpg` },
    close: async () => {
      await Promise.all([stop(secure), stop(plain)]);
    },
  };
}
