// Shared helpers of the browser scripts: launching Debian's Chromium through
// playwright-core, named steps that report "ok NAME" or fail the run, and
// calls to the server from outside the browser.
import { chromium } from "playwright-core";
import { createHash } from "node:crypto";

export const BASE = process.env.BASE_URL;
export const ARTIFACTS = process.env.ARTIFACTS || "/tmp";

// The flags the project runs Chromium with: headless, no sandbox (CI runs
// as root), nothing that reaches the network on its own. Playwright gives
// every launch a fresh profile directory.
export const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"];

export async function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args: FLAGS, timeout: 180000 });
}

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

export function eq(got, want, what) {
  if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

export const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");

let current = null;
export function usePage(p) { current = p; }

// step runs fn as one named check; a failure keeps a screenshot and ends
// the script with a non-zero exit.
export async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    if (current) {
      const shot = `${ARTIFACTS}/failure-${name.replace(/[^a-z0-9]+/gi, "-")}.png`;
      await current.screenshot({ path: shot, fullPage: true }).catch(() => {});
      console.log(`screenshot: ${shot}`);
    }
    if (e && typeof e === "object") e.reported = true;
    throw e;
  }
}

// server calls the API from outside the browser (another client, an agent).
export async function server(path, opts) {
  opts = opts || {};
  const headers = Object.assign({}, opts.headers || {});
  let body = opts.body;
  if (opts.json !== undefined) { body = JSON.stringify(opts.json); headers["Content-Type"] = "application/json"; }
  const res = await fetch(BASE + path, { method: opts.method || (body ? "POST" : "GET"), headers, body });
  const buf = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, buf, json: () => JSON.parse(buf.toString("utf8")), text: () => buf.toString("utf8") };
}

export async function run(fn) {
  let browser;
  try {
    browser = await launch();
    await fn(browser);
  } catch (e) {
    if (!(e && e.reported)) console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
    process.exitCode = 1;
  } finally {
    if (browser) await browser.close().catch(() => {});
  }
}
