// Timings of the page in Chromium, printed as {"metric", "ms"} lines for
// bench_test.go: BENCH=pageload (first paint and list interactive, a fresh
// context each time) or BENCH=viewer (click to first page of big files).
import { BASE, run } from "./lib.mjs";

const N = Math.max(1, parseInt(process.env.N || "1", 10));
const emit = (metric, ms) => console.log(JSON.stringify({ metric, ms: Math.round(ms * 10) / 10 }));

async function pageload(browser) {
  const files = parseInt(process.env.FILES || "0", 10);
  for (let i = 0; i < N; i++) {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    await page.goto(BASE + "/");
    await page.locator("html[data-ready='1']").waitFor({ timeout: 60000 });
    // Every row in.
    await page.locator("#filelist[data-complete='1']").waitFor({ timeout: 60000 });
    const t = await page.evaluate(() => ({
      paint: (performance.getEntriesByName("first-contentful-paint")[0] || performance.getEntriesByName("first-paint")[0] || {}).startTime,
      list: performance.getEntriesByName("list-interactive")[0].startTime,
      rows: document.querySelectorAll(".file-row").length,
      history: performance.getEntriesByName("history-loaded")[0].startTime,
      fetch: (() => { const e = performance.getEntriesByType("resource").find((r) => r.name.endsWith("/api/history")); return e ? e.responseEnd - e.startTime : -1; })(),
      fetchStart: (() => { const e = performance.getEntriesByType("resource").find((r) => r.name.endsWith("/api/history")); return e ? e.startTime : -1; })(),
    }));
    // When the first row was painted (Element Timing), -1 if never reported.
    t.painted = await page.evaluate(() => new Promise((resolve) => {
      new PerformanceObserver((l) => {
        const e = l.getEntries().find((x) => x.identifier === "first-row");
        if (e) resolve(e.renderTime || e.loadTime);
      }).observe({ type: "element", buffered: true });
      setTimeout(() => resolve(-1), 5000);
    }));
    if (process.env.DETAIL) console.log(JSON.stringify(t));
    if (files && t.rows !== files) throw new Error(`${t.rows} rows listed, want ${files}`);
    emit("first-paint", t.paint);
    // The same browser painting a trivial page (GET /healthz as text): what
    // this machine costs any page, for comparison.
    const bare = await ctx.newPage();
    await bare.goto(BASE + "/healthz");
    emit("baseline-first-paint", await bare.evaluate(paintTime));
    await bare.close();
    emit("list-interactive", t.list);
    // The frame that shows the rows (not a target; what a user sees).
    emit("list-painted", t.painted);
    await ctx.close();
    // The same trivial page as the first page of a fresh context, as the
    // workspace page is measured: the floor for a new context's renderer
    // (the baseline above reuses a warm one). Measured after the page, so
    // that first-paint is taken as before.
    const fresh = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const first = await fresh.newPage();
    await first.goto(BASE + "/healthz");
    emit("fresh-baseline-first-paint", await first.evaluate(paintTime));
    await fresh.close();
  }
}

// paintTime is the page's first (contentful) paint, waiting for it if it
// has not been reported yet.
function paintTime() {
  return new Promise((resolve) => {
    const get = () => (performance.getEntriesByName("first-contentful-paint")[0] || performance.getEntriesByName("first-paint")[0]);
    if (get()) return resolve(get().startTime);
    new PerformanceObserver(() => get() && resolve(get().startTime)).observe({ type: "paint", buffered: true });
  });
}

async function viewer(browser) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(120000);
  await page.goto(BASE + "/");
  await page.locator("html[data-ready='1']").waitFor();
  const cases = [["big.xlsx", "#viewer-body tbody tr", "xlsx-100k-first-page"], ["big.csv", "#viewer-body tbody tr", "csv-100k-first-page"],
    ["big.log", "#viewer-body pre.lines", "text-50mb-first-page"]];
  for (const [name, ready, metric] of cases) {
    for (let i = 0; i <= N; i++) {
      const t0 = performance.now();
      await page.locator(`.file-row[data-name="${name}"] button.name`).click();
      await page.locator(ready).first().waitFor();
      const ms = performance.now() - t0;
      // The first open reads the file cold; later ones reuse the server's caches.
      emit(i === 0 ? metric + "-cold" : metric, ms);
      await page.keyboard.press("Escape");
      await page.waitForFunction(() => !document.getElementById("viewer").open);
    }
  }
  await ctx.close();
}

await run(async (browser) => {
  if (process.env.BENCH === "viewer") await viewer(browser);
  else await pageload(browser);
});
