/**
 * Page screenshots for the recording session (tls-and-resources.md B.1): the viewport as PNG in
 * device pixels (`urn:view:<page-url>`), and a thumbnail as JPEG (`urn:thumbnail:<page-url>`),
 * 640 px wide and at most 360 px high: the top 16:9 band of the viewport, scaled down by
 * Chromium itself (`Page.captureScreenshot` with a scaled clip), so no image library is needed.
 */
import type { Page } from "playwright-core";

export const THUMBNAIL_WIDTH = 640;
export const THUMBNAIL_HEIGHT = 360;
export const THUMBNAIL_QUALITY = 80;

export interface Viewport {
  width: number;
  height: number;
  deviceScaleFactor: number;
}

export interface Screenshots {
  view: Buffer;
  thumbnail: Buffer;
  viewport: Viewport;
  /** Microseconds since the epoch when the viewport screenshot was taken. */
  takenMicros: bigint;
}

interface LayoutMetrics {
  cssVisualViewport: { pageX: number; pageY: number; clientWidth: number; clientHeight: number };
}

export async function takeScreenshots(page: Page): Promise<Screenshots> {
  const cdp = await page.context().newCDPSession(page);
  try {
    const vp = page.viewportSize();
    const measured = (await page.evaluate(() => ({ width: window.innerWidth, height: window.innerHeight, dpr: window.devicePixelRatio }))) as { width: number; height: number; dpr: number };
    const viewport: Viewport = { width: vp?.width ?? measured.width, height: vp?.height ?? measured.height, deviceScaleFactor: measured.dpr || 1 };
    const takenMicros = BigInt(Date.now()) * 1000n;
    // The viewport in device pixels, as the person sees it.
    const view = await page.screenshot({ type: "png", scale: "device", timeout: 30_000 });
    const m = (await cdp.send("Page.getLayoutMetrics")) as unknown as LayoutMetrics;
    const v = m.cssVisualViewport;
    // The clip is in CSS pixels of the document. Whether the output is also scaled by the device
    // scale factor depends on how that factor came about (emulated or a real screen), so the
    // scale is corrected once from what came out.
    const width = v.clientWidth || viewport.width;
    const height = Math.min(v.clientHeight || viewport.height, Math.round((width * THUMBNAIL_HEIGHT) / THUMBNAIL_WIDTH));
    let scale = THUMBNAIL_WIDTH / width;
    let thumbnail = Buffer.alloc(0);
    for (let attempt = 0; attempt < 2; attempt++) {
      const shot = (await cdp.send("Page.captureScreenshot", {
        format: "jpeg",
        quality: THUMBNAIL_QUALITY,
        clip: { x: v.pageX, y: v.pageY, width, height, scale },
      })) as { data: string };
      thumbnail = Buffer.from(shot.data, "base64");
      const got = jpegSize(thumbnail);
      if (!got || Math.abs(got.width - THUMBNAIL_WIDTH) <= 1) break;
      scale = (scale * THUMBNAIL_WIDTH) / got.width;
    }
    return { view, thumbnail, viewport, takenMicros };
  } finally {
    await cdp.detach().catch(() => undefined);
  }
}

/** Width and height of a PNG (IHDR), or null. */
export function pngSize(b: Buffer): { width: number; height: number } | null {
  if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47 || b.toString("latin1", 12, 16) !== "IHDR") return null;
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** Width and height of a JPEG (its first SOFn marker), or null. */
export function jpegSize(b: Buffer): { width: number; height: number } | null {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return null;
  let i = 2;
  while (i + 9 < b.length) {
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1]!;
    if (marker === 0xff) {
      i++;
      continue;
    }
    if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
      i += 2;
      continue;
    }
    const len = b.readUInt16BE(i + 2);
    // SOF0..SOF15, except DHT (c4), JPG (c8) and DAC (cc).
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: b.readUInt16BE(i + 5), width: b.readUInt16BE(i + 7) };
    }
    i += 2 + len;
  }
  return null;
}
