// The workspace page as a user meets it, in Chromium: every check waits for
// a signal (an element, an event, a download), never for a fixed time.
import { readFile } from "node:fs/promises";
import { BASE, ARTIFACTS, run, step, assert, eq, sha256, server, usePage } from "./lib.mjs";

const FX = JSON.parse(process.env.FIXTURES || "{}");

// A fake File System Access API that records what the page writes: the
// real picker is a native dialog a headless browser cannot answer.
function fakeSavePicker() {
  window.__saved = [];
  window.showSaveFilePicker = async (opts) => ({
    createWritable: async () => {
      const parts = [];
      return {
        write: async (b) => { parts.push(b); },
        close: async () => {
          const bytes = new Uint8Array(await new Blob(parts).arrayBuffer());
          window.__saved.push({ name: opts.suggestedName, bytes: Array.from(bytes) });
        },
      };
    },
  });
}

const row = (page, name) => page.locator(`.file-row[data-name="${name}"]`);

async function drop(page, files) {
  const dt = await page.evaluateHandle((files) => {
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(new File([f.text], f.name, { type: "text/plain" }));
    return dt;
  }, files);
  await page.dispatchEvent("#filelist", "dragenter", { dataTransfer: dt });
  await page.dispatchEvent("#filelist", "drop", { dataTransfer: dt });
}

async function openFile(page, name) {
  await row(page, name).locator("button.name").click();
  await page.locator(`#viewer[open][data-file-id]`).waitFor();
  await page.locator("#viewer-name", { hasText: name }).waitFor();
}

async function closeViewer(page) {
  await page.keyboard.press("Escape");
  await page.locator("#viewer[open]").waitFor({ state: "detached" }).catch(() => {});
  await page.waitForFunction(() => !document.getElementById("viewer").open);
}

async function runInConsole(page, code) {
  await page.click("#tab-console");
  await page.fill("#code", code);
  await page.fill("#input", "{}");
  const done = page.waitForResponse((r) => r.url().endsWith("/api/run"));
  await page.click("#run-btn");
  const res = await done;
  await page.locator("#run-btn:not([disabled])").waitFor();
  return res.headers()["x-run-id"];
}

// layoutProblems lists controls that are clipped, squeezed or outside the
// viewport, names that wrap, and a page that scrolls sideways.
async function layoutProblems(page, scope) {
  return page.evaluate((scope) => {
    const out = [];
    const W = document.documentElement.clientWidth;
    if (document.documentElement.scrollWidth > W + 1) out.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${W}`);
    const root = scope ? document.querySelector(scope) : document;
    const visible = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden"; };
    for (const b of root.querySelectorAll("button, .button, [role=tab], input:not([type=file]), select")) {
      if (!visible(b)) continue;
      const r = b.getBoundingClientRect();
      const label = (b.getAttribute("aria-label") || b.textContent || b.id || b.tagName).trim().slice(0, 50);
      if (r.left < -0.5 || r.right > W + 0.5) out.push(`${label}: outside the viewport (${Math.round(r.left)}–${Math.round(r.right)} of ${W})`);
      if (b.matches(".file-row .name, .viewer-title *")) {
        if (b.scrollWidth > b.clientWidth + 1 && r.width < 120) out.push(`name "${label}" cut to ${r.width}px`);
        if (r.height > 28) out.push(`name "${label}" wraps (${r.height}px tall)`);
        continue; // long names end in an ellipsis on purpose (the full name is the title)
      }
      if (b.scrollWidth > b.clientWidth + 1) out.push(`${label}: text clipped (${b.scrollWidth} > ${b.clientWidth})`);
      if (r.width < 24 || r.height < 18) out.push(`${label}: a ${Math.round(r.width)}×${Math.round(r.height)} px sliver`);
      const rowEl = b.closest(".file-row");
      if (rowEl) {
        const rr = rowEl.getBoundingClientRect();
        if (r.right > rr.right + 0.5 || r.left < rr.left - 0.5) out.push(`${label}: outside its row`);
        const name = rowEl.querySelector(".name").getBoundingClientRect();
        const overlap = Math.min(r.right, name.right) - Math.max(r.left, name.left) > 0.5 && Math.min(r.bottom, name.bottom) - Math.max(r.top, name.top) > 0.5;
        if (b !== rowEl.querySelector(".name") && overlap) out.push(`${label}: overlaps the name`);
      }
    }
    for (const t of root.querySelectorAll(".file-row .type")) {
      if (!visible(t)) continue;
      const r = t.getBoundingClientRect(), rr = t.closest(".file-row").getBoundingClientRect();
      if (r.right > rr.right + 0.5) out.push(`MIME type ${t.textContent} runs past its row`);
    }
    return out;
  }, scope || null);
}

await run(async (browser) => {
  const ctx = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  ctx.setDefaultTimeout(60000);
  await ctx.addInitScript(fakeSavePicker);
  const page = await ctx.newPage();
  usePage(page);
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  // A script the page's CSP blocks (the inline boot script, if its hash
  // were wrong) is reported on the console only.
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) errors.push(m.text()); });

  await step("page loads and goes live", async () => {
    await page.goto(BASE + "/");
    await page.locator("html[data-ready='1'][data-live='1']").waitFor();
    for (const n of ["notes.md", "people.csv", "book.xlsx", "doc.pdf", "pixel.png", "data.json", "server.log", FX.long_name]) await row(page, n).waitFor();
    eq(await page.textContent("#ws"), "default", "workspace name");
  });

  await step("a file name that is markup shows as text", async () => {
    eq(await row(page, FX.hostile_name).locator("button.name").textContent(), FX.hostile_name, "hostile name");
    eq(await page.locator("#filelist img").count(), 0, "images in the list");
    eq(await page.evaluate(() => window.__xss_name), undefined, "markup in a name did not run");
  });

  await step("upload by drop", async () => {
    await drop(page, [{ name: "dropped.txt", text: "first drop\n" }]);
    await row(page, "dropped.txt").waitFor();
    eq((await server("/api/files/dropped.txt/download")).text(), "first drop\n", "dropped body");
  });

  await step("a drop onto an existing name asks: keep both", async () => {
    await drop(page, [{ name: "dropped.txt", text: "second drop\n" }]);
    await page.locator("#ask[open]").waitFor();
    assert((await page.textContent("#ask-title")).includes("dropped.txt"), "the question names the file");
    await page.click("#ask button[data-choice='keep']");
    await row(page, "dropped (1).txt").waitFor();
    eq((await server("/api/files/dropped.txt/download")).text(), "first drop\n", "original kept");
  });

  await step("a drop onto an existing name asks: replace", async () => {
    await drop(page, [{ name: "dropped.txt", text: "third drop\n" }]);
    await page.locator("#ask[open]").waitFor();
    await page.click("#ask button[data-choice='replace']");
    // Replacing keeps a backup: Revert appears on the row.
    await row(page, "dropped.txt").getByRole("button", { name: "Revert dropped.txt" }).waitFor();
    eq((await server("/api/files/dropped.txt/download")).text(), "third drop\n", "replaced body");
  });

  await step("revert asks, then restores", async () => {
    await row(page, "dropped.txt").getByRole("button", { name: "Revert dropped.txt" }).click();
    await page.locator("#ask[open]").waitFor();
    await page.click("#ask button[data-choice='revert']");
    await row(page, "dropped.txt").getByRole("button", { name: "Revert dropped.txt" }).waitFor({ state: "detached" });
    eq((await server("/api/files/dropped.txt/download")).text(), "first drop\n", "reverted body");
  });

  await step("the list updates live from a script run elsewhere", async () => {
    const r = await server("/api/run", { json: { code: `await files.create("made-by-script.md", {content: "# Made\\n"}); return "done"` },
      headers: { "X-Session-Id": "agent-1" } });
    eq(r.json().ok, true, "run ok");
    await row(page, "made-by-script.md").waitFor();
    // …and the run feed shows the call and its file.
    const run = page.locator("#feed li.run[data-name='script.js']").filter({ hasText: "made-by-script.md" });
    await run.waitFor();
    assert((await run.textContent()).includes("agent-1"), "the feed names the session");
    await run.locator(".file-card", { hasText: "made-by-script.md" }).waitFor();
    // …with the script's own host call, its arguments and outcome.
    const call = run.locator(".host-calls li.host-call.success");
    await call.waitFor({ state: "attached" });
    eq(await run.locator(".host-calls summary").textContent(), "1 host call", "host call count");
    const text = await call.textContent();
    assert(text.includes("files.create") && text.includes('"made-by-script.md"') && text.includes("ok"), "host call row: " + text);
  });

  await step("markdown viewer renders and sanitizes", async () => {
    await openFile(page, "notes.md");
    eq(await page.textContent("#viewer-body .markdown h1"), "Quarterly report", "heading");
    eq(await page.textContent("#viewer-body .markdown td"), "North", "table cell");
    eq(await page.evaluate(() => window.__xss), undefined, "script in markdown did not run");
    eq(await page.locator("#viewer-body .markdown script").count(), 0, "no script element");
    await closeViewer(page);
  });

  await step("CSV viewer pages through rows", async () => {
    await openFile(page, "people.csv");
    await page.locator("#viewer-body table.grid tbody tr").first().waitFor();
    eq(await page.locator("#viewer-body thead th").allTextContents(), ["#", "id", "name", "score"], "header");
    eq(await page.locator("#viewer-body tbody tr").first().locator("td").allTextContents(), ["1", "person 1", "3"], "first row");
    eq(await page.textContent("#viewer-body .pager .range"), "rows 1–100 of 250", "range");
    await page.click("#viewer-body .pager button:has-text('Next')");
    await page.locator("#viewer-body .pager .range", { hasText: "rows 101–200 of 250" }).waitFor();
    eq(await page.locator("#viewer-body tbody tr").first().locator("td").allTextContents(), ["101", "person 101", "303"], "row 101");
    const sticky = await page.$eval("#viewer-body thead th", (th) => getComputedStyle(th).position);
    eq(sticky, "sticky", "frozen header");
    await closeViewer(page);
  });

  await step("xlsx viewer shows cells and sheet tabs", async () => {
    await openFile(page, "book.xlsx");
    await page.locator("#viewer-body tbody tr").first().waitFor();
    eq(await page.locator("#viewer-body .sheet-tab").allTextContents(), ["Sheet1", "Notes"], "tabs");
    eq(await page.locator("#viewer-body thead th").allTextContents(), ["#", "Region", "Units", "Price"], "header row");
    eq(await page.locator("#viewer-body tbody tr").nth(1).locator("td").allTextContents(), ["South", "7", "3.25"], "cells");
    await page.click("#viewer-body .sheet-tab:has-text('Notes')");
    await page.locator("#viewer-body td", { hasText: "second sheet cell" }).waitFor();
    await closeViewer(page);
  });

  await step("image viewer shows the picture at its pixel size", async () => {
    await openFile(page, "pixel.png");
    const size = page.locator("#viewer-body .pixel-size[data-width]");
    await size.waitFor();
    eq([await size.getAttribute("data-width"), await size.getAttribute("data-height")], [String(FX.pixel.width), String(FX.pixel.height)], "pixel size");
    await closeViewer(page);
  });

  await step("PDF viewer shows server-rendered pages", async () => {
    await openFile(page, "doc.pdf");
    const img = page.locator("#viewer-body img.page-image[data-page='1']");
    await img.waitFor();
    await page.waitForFunction(() => { const i = document.querySelector("#viewer-body img.page-image"); return i && i.complete && i.naturalWidth > 0; });
    const [w, h] = await img.evaluate((i) => [i.naturalWidth, i.naturalHeight]);
    assert(w >= 400 && Math.abs(h / w - 842 / 595) < 0.01, `page 1 is ${w}×${h}, not an A4 page`);
    eq(await page.textContent("#viewer-body .pager .range"), "pages 1–1 of 2", "page count");
    await page.keyboard.press("ArrowRight");
    await page.locator("#viewer-body img.page-image[data-page='2']").waitFor();
    await closeViewer(page);
  });

  await step("JSON viewer pretty-prints", async () => {
    await openFile(page, "data.json");
    const text = await page.locator("#viewer-body pre.lines").textContent();
    assert(text.includes('  "name": "metaclaw",\n  "tags": [\n    "a",'), "pretty JSON: " + text);
    await closeViewer(page);
  });

  await step("text viewer numbers lines and pages", async () => {
    await openFile(page, "server.log");
    await page.locator("#viewer-body .pager .range", { hasText: "lines 1–500 of 1,200" }).waitFor();
    const gutter = await page.textContent("#viewer-body pre.gutter");
    assert(gutter.startsWith("1\n2\n3\n"), "line numbers");
    assert((await page.textContent("#viewer-body pre.lines")).startsWith("line 1 of the log\nline 2 of the log"), "lines");
    await page.fill("#viewer-body .pager input.goto", "1100");
    await page.press("#viewer-body .pager input.goto", "Enter");
    await page.locator("#viewer-body .pager .range", { hasText: "lines 1,100–1,200 of 1,200" }).waitFor();
    assert((await page.textContent("#viewer-body pre.lines")).startsWith("line 1100 of the log"), "line 1100");
    await closeViewer(page);
  });

  await step("download is byte-identical", async () => {
    for (const [name, sum] of [["pixel.png", FX.pixel.sha256], ["book.xlsx", FX.book.sha256]]) {
      const [dl] = await Promise.all([page.waitForEvent("download"), row(page, name).getByRole("button", { name: "Download " + name }).click()]);
      eq(dl.suggestedFilename(), name, "download name");
      const path = `${ARTIFACTS}/download-${name}`;
      await dl.saveAs(path);
      eq(sha256(await readFile(path)), sum, name + " sha256");
    }
  });

  await step("run console shows logs, result and files", async () => {
    const id = await runInConsole(page, `console.log("hello from the console", 42);\nawait files.writeText("console-out.txt", "written");\nreturn {answer: 42};`);
    assert(id, "X-Run-Id");
    eq((await page.textContent("#run-status")).startsWith("ok"), true, "status");
    assert((await page.textContent("#run-logs")).includes("hello from the console 42"), "logs");
    assert((await page.textContent("#run-result")).includes('"answer": 42'), "result");
    await page.locator("#run-files .artifact", { hasText: "console-out.txt" }).waitFor();
    await row(page, "console-out.txt").waitFor();
    // The feed shows this tab's run as "you".
    await page.click("#tab-runs");
    await page.locator(`#feed li.run[data-id="${id}"]`, { hasText: "you" }).waitFor();
  });

  await step("run console shows errors with code and stack", async () => {
    await runInConsole(page, `function inner() { throw new Error("boom here"); }\ninner();`);
    assert((await page.textContent("#run-error")).includes("boom here"), "message");
    const code = await page.textContent("#run-error strong");
    assert(/^[A-Z_]+$/.test(code), "coded error: " + code);
    assert((await page.textContent("#run-stack")).includes("inner"), "stack names the function");
    await runInConsole(page, `await files.readText("no-such-file.txt")`);
    eq(await page.textContent("#run-error strong"), "NOT_FOUND", "host error code");
  });

  await step("a save-to-disk instruction uses the File System Access API", async () => {
    const id = await runInConsole(page, `return {requiresFrontendExecution: true, type: "file_operation", operation: "save", file: "notes.md", filename: "notes-copy.md"}`);
    await page.waitForFunction(() => window.__saved.length > 0);
    const saved = await page.evaluate(() => window.__saved[0]);
    eq(saved.name, "notes-copy.md", "suggested name");
    eq(sha256(Buffer.from(saved.bytes)), FX.notes.sha256, "saved bytes");
    await page.click("#tab-runs");
    await page.locator(`#feed li.run[data-id="${id}"] .instruction[data-status="done"]`).waitFor();
    const msg = (await server("/api/runs/" + id)).json();
    eq([msg.instructions[0].status, msg.instructions[0].method], ["done", "file_system_access"], "reported back");
  });

  await step("without the API the instruction downloads", async () => {
    const ctx2 = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    ctx2.setDefaultTimeout(60000);
    await ctx2.addInitScript(() => Object.defineProperty(window, "showSaveFilePicker", { value: undefined, configurable: true }));
    const p2 = await ctx2.newPage();
    await p2.goto(BASE + "/");
    await p2.locator("html[data-ready='1'][data-live='1']").waitFor();
    const [dl, id] = await Promise.all([p2.waitForEvent("download"),
      runInConsole(p2, `return {note: "here", save: {requiresFrontendExecution: true, file: "pixel.png"}}`)]);
    eq(dl.suggestedFilename(), "pixel.png", "download name");
    const path = `${ARTIFACTS}/instruction-pixel.png`;
    await dl.saveAs(path);
    eq(sha256(await readFile(path)), FX.pixel.sha256, "downloaded bytes");
    await p2.click("#tab-runs");
    await p2.locator(`#feed li.run[data-id="${id}"] .instruction[data-status="done"]`).waitFor();
    eq((await server("/api/runs/" + id)).json().instructions[0].method, "download", "reported method");
    // The first page sees the report live, without acting on the other tab's instruction.
    await page.locator(`#feed li.run[data-id="${id}"] .instruction[data-status="done"]`).waitFor();
    await ctx2.close();
  });

  await step("an agent's instruction waits for a click", async () => {
    const r = await server("/api/run", { json: { code: `return {requiresFrontendExecution: true, content: "from the agent", filename: "agent.txt"}` },
      headers: { "X-Session-Id": "agent-2" } });
    const id = r.headers.get("x-run-id");
    const card = page.locator(`#feed li.run[data-id="${id}"] .instruction[data-status="pending"]`);
    await card.waitFor();
    const before = await page.evaluate(() => window.__saved.length);
    await card.getByRole("button", { name: "Save…" }).click();
    await page.waitForFunction((n) => window.__saved.length > n, before);
    eq(Buffer.from((await page.evaluate(() => window.__saved.at(-1))).bytes).toString(), "from the agent", "inline content saved");
    await page.locator(`#feed li.run[data-id="${id}"] .instruction[data-status="done"]`).waitFor();
  });

  await step("file actions work by keyboard; delete asks", async () => {
    await server("/api/files/upload?name=delete-me.txt", { body: (() => { const f = new FormData(); f.append("file", new Blob(["bye"]), "delete-me.txt"); return f; })() });
    const r = row(page, "delete-me.txt");
    await r.waitFor();
    await r.focus();
    await page.keyboard.press("Enter");
    await page.locator("#viewer[open]").waitFor();
    await page.locator("#viewer-body pre.lines", { hasText: "bye" }).waitFor();
    await closeViewer(page);
    await r.focus();
    await page.keyboard.press("Delete");
    await page.locator("#ask[open]").waitFor();
    await page.keyboard.press("Escape");
    await page.waitForFunction(() => !document.getElementById("ask").open);
    eq((await server("/api/files/delete-me.txt")).status, 200, "cancelled delete keeps the file");
    await r.focus();
    await page.keyboard.press("Delete");
    await page.locator("#ask[open]").waitFor();
    await page.click("#ask button[data-choice='delete']");
    await r.waitFor({ state: "detached" });
    eq((await server("/api/files/delete-me.txt")).status, 404, "deleted");
  });

  await step("how to connect an agent is on the page", async () => {
    await page.click("#connect-btn");
    await page.locator("#connect[open]").waitFor();
    eq(await page.textContent("#mcp-url"), BASE + "/mcp", "MCP URL");
    assert((await page.textContent("#curl-example")).includes(BASE + "/api/tools/file_read_text"), "curl example");
    assert((await page.textContent("#mcp-config")).includes('"url": "' + BASE + '/mcp"'), "client config");
    await page.keyboard.press("Escape");
  });

  for (const width of [390, 1280, 1920]) {
    await step(`layout holds at ${width} px`, async () => {
      await page.setViewportSize({ width, height: 900 });
      await page.click("#tab-runs");
      await row(page, FX.long_name).waitFor();
      let problems = await layoutProblems(page);
      await page.screenshot({ path: `${ARTIFACTS}/layout-${width}.png`, fullPage: true });
      await openFile(page, FX.long_name);
      await page.locator("#viewer-body tbody tr").first().waitFor();
      problems = problems.concat((await layoutProblems(page, "#viewer")).map((p) => "viewer: " + p));
      await page.screenshot({ path: `${ARTIFACTS}/layout-${width}-viewer.png` });
      await closeViewer(page);
      assert(problems.length === 0, problems.join("\n"));
    });
  }

  await step("no script errors", async () => {
    eq(errors, [], "page errors");
  });
});
