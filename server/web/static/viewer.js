// The file viewer: one dialog, one renderer per kind of file. Everything
// big is paged through the host's operations (the same meta-tools agents
// call), so opening a 100,000-row sheet or a 50 MB log reads one page:
//   markdown  GET /api/files/{id}/html (rendered and sanitized on the server)
//   text/code file_read_text, 500 lines a page, with line numbers
//   JSON      pretty-printed (large files page as text)
//   CSV       table_read_rows, 100 rows a page (spreadsheet_read_range when
//             the host has no table engine)
//   xlsx      spreadsheet_list_sheets + spreadsheet_read_range, sheet tabs,
//             the first row frozen as the header
//   image     the file itself, with its pixel size
//   PDF       pdf_info, then each page as an image rendered on the server
import { api, tool, fileURL, blobURL, ApiError } from "./api.js";
import { $, el, toast, human, kindOf, plural } from "./ui.js";

const TEXT_PAGE = 500;
const QUIET = { quiet: true }; // the viewer's reads stay out of the run feed
const GRID_PAGE = 100;
const MAX_LINE = 10000;
const MAX_COLUMNS = 200;
const EARLY_COLUMNS = 52; // columns of the first page read before the sheet's width is known

let current = null; // {file, token, urls: [], cleanup: []}
let seq = 0;

// actions the app provides: download(f), saveToDisk(f), revert(f), remove(f).
let actions = {};
export function setViewerActions(a) { actions = a; }

export function viewerFile() { return current && $("viewer").open ? current.file : null; }

export function closeViewer() {
  const d = $("viewer");
  if (d.open) d.close();
}

// Closing the dialog (Close, Escape) lets go of the file's resources.
export function setupViewer() {
  $("viewer").addEventListener("close", () => {
    release();
    $("viewer-body").replaceChildren();
  });
}

function release() {
  if (!current) return;
  for (const u of current.urls) URL.revokeObjectURL(u);
  for (const fn of current.cleanup) fn();
  current = null;
}

// openViewer shows f (a file of the list: id, name, size, mime_type, …).
export async function openViewer(f, opts) {
  release();
  const token = ++seq;
  current = { file: f, token, urls: [], cleanup: [] };
  const d = $("viewer");
  $("viewer-name").textContent = f.name;
  $("viewer-name").title = f.name;
  setMeta(f, "");
  renderActions(f);
  const body = $("viewer-body");
  body.replaceChildren(el("div", { class: "loading" }, "Loading…"));
  body.dataset.kind = kindOf(f);
  if (!d.open) d.showModal();
  d.dataset.fileId = f.id;
  try {
    await render(f, body, token, opts || {});
  } catch (e) {
    if (!alive(token)) return;
    body.replaceChildren(errorBox(e));
  }
}

function alive(token) { return current && current.token === token && $("viewer").open; }

function setMeta(f, extra) {
  const parts = [human(f.size), f.mime_type || ""];
  if (extra) parts.push(extra);
  const m = $("viewer-meta");
  m.textContent = parts.filter(Boolean).join(" · ");
  m.title = f.mime_type || "";
}

function renderActions(f) {
  const box = $("viewer-actions");
  const b = (label, fn, cls, id) => el("button", { type: "button", class: cls || "ghost", id, onclick: fn }, label);
  const list = [b("Download", () => actions.download(f), "ghost", "viewer-download")];
  if (typeof window.showSaveFilePicker === "function") list.push(b("Save to disk…", () => actions.saveToDisk(f), "ghost", "viewer-save"));
  if (f.has_backup) list.push(b("Revert", () => actions.revert(f), "ghost", "viewer-revert"));
  list.push(b("Delete", () => actions.remove(f), "danger", "viewer-delete"));
  list.push(b("Close", closeViewer, "ghost", "viewer-close"));
  box.replaceChildren(...list);
}

// refreshViewer re-reads the open file when it changed (a revert, a run).
export function refreshViewer(f) {
  if (!current || current.file.id !== f.id || !$("viewer").open) return;
  openViewer(f, { keepPlace: true });
}

function errorBox(e) {
  const code = e instanceof ApiError ? e.code : "ERROR";
  return el("div", { class: "error-box", role: "alert" }, el("strong", {}, code), " ", e.message);
}

async function render(f, body, token, opts) {
  const kind = kindOf(f);
  switch (kind) {
    case "md": return renderMarkdown(f, body, token);
    case "pdf": return renderPDF(f, body, token, opts);
    case "image": return renderImage(f, body, token);
    case "csv": return renderGrid(f, body, token, "csv");
    case "xlsx": return renderGrid(f, body, token, "xlsx");
    case "json": return renderJSON(f, body, token);
    case "text": case "code": return renderText(f, body, token);
  }
  if ((f.mime_type || "").startsWith("text/") || f.mime_type === "application/octet-stream") return renderText(f, body, token);
  body.replaceChildren(el("div", { class: "no-preview" }, `No preview for ${f.mime_type || "this type"}. `,
    el("button", { type: "button", class: "primary", onclick: () => actions.download(f) }, "Download")));
}

// --- markdown
async function renderMarkdown(f, body, token) {
  const html = await api(fileURL(f.id, "html"));
  if (!alive(token)) return;
  const doc = el("article", { class: "markdown" });
  // Sanitized on the server (no raw HTML, no script URLs); the page's CSP
  // forbids inline scripts as a second line.
  doc.innerHTML = html;
  for (const a of doc.querySelectorAll("a[href]")) { a.target = "_blank"; a.rel = "noopener noreferrer"; }
  const src = el("button", { type: "button", class: "ghost small", onclick: () => renderText(f, body, token) }, "Show source");
  body.replaceChildren(el("div", { class: "view-tools" }, src), doc);
}

// --- text with line numbers, paged
async function renderText(f, body, token, startAt) {
  let start = startAt || 1;
  const box = el("div", { class: "textview" });
  const nav = el("div", { class: "pager" });
  body.replaceChildren(nav, box);
  const load = async (from) => {
    const r = await tool("file_read_text", { id: f.id, start_line: from, end_line: from + TEXT_PAGE - 1 }, QUIET);
    if (!alive(token)) return;
    start = from;
    const lines = r.content.split("\n");
    if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
    showLines(box, lines, from);
    const total = r.total_lines;
    pager(nav, from, Math.min(from + lines.length - 1, total), total, TEXT_PAGE, "line", load);
  };
  await load(start);
}

function showLines(box, lines, from) {
  const nums = [], text = [];
  lines.forEach((l, i) => {
    nums.push(String(from + i));
    text.push(l.length > MAX_LINE ? l.slice(0, MAX_LINE) + ` … (${l.length.toLocaleString()} characters)` : l);
  });
  box.replaceChildren(el("pre", { class: "gutter", "aria-hidden": "true" }, nums.join("\n")), el("pre", { class: "lines" }, text.join("\n")));
}

// pager draws "from–to of total" with previous/next and a go-to box.
function pager(nav, from, to, total, size, unit, load) {
  const go = el("input", { type: "number", min: 1, max: Math.max(total, 1), value: from, "aria-label": `Go to ${unit}`, class: "goto" });
  go.addEventListener("keydown", (e) => { if (e.key === "Enter") { const n = Math.max(1, Math.min(total, parseInt(go.value, 10) || 1)); load(n); } });
  const prev = el("button", { type: "button", class: "ghost small", disabled: from <= 1, onclick: () => load(Math.max(1, from - size)) }, "‹ Previous");
  const next = el("button", { type: "button", class: "ghost small", disabled: to >= total, onclick: () => load(to + 1) }, "Next ›");
  const label = total === 0 ? `no ${unit}s` : `${unit}s ${from.toLocaleString()}–${to.toLocaleString()} of ${total.toLocaleString()}`;
  nav.replaceChildren(prev, el("span", { class: "range", "data-total": total, "data-from": from }, label), next, el("label", { class: "inline" }, "Go to ", go));
}

// --- JSON
async function renderJSON(f, body, token) {
  if (f.size > 2 << 20) return renderText(f, body, token);
  const c = await api(fileURL(f.id, "content"));
  if (!alive(token)) return;
  if (c.content === null || c.content === undefined) return renderText(f, body, token);
  let lines;
  let note = null;
  try {
    lines = JSON.stringify(JSON.parse(c.content), null, 2).split("\n");
  } catch (e) {
    note = el("div", { class: "note" }, "Not valid JSON (" + e.message + "); shown as text.");
    lines = c.content.split("\n");
  }
  const box = el("div", { class: "textview json" });
  const nav = el("div", { class: "pager" });
  body.replaceChildren(...[note, nav, box].filter(Boolean));
  const load = (from) => {
    showLines(box, lines.slice(from - 1, from - 1 + TEXT_PAGE), from);
    pager(nav, from, Math.min(from + TEXT_PAGE - 1, lines.length), lines.length, TEXT_PAGE, "line", load);
  };
  load(1);
}

// --- images
async function renderImage(f, body, token) {
  const url = await blobURL(fileURL(f.id, "download"));
  if (!alive(token)) { URL.revokeObjectURL(url); return; }
  current.urls.push(url);
  const img = el("img", { src: url, alt: f.name, class: "image-view" });
  const size = el("div", { class: "pixel-size" });
  img.addEventListener("load", () => {
    size.textContent = `${img.naturalWidth} × ${img.naturalHeight} px`;
    size.dataset.width = img.naturalWidth;
    size.dataset.height = img.naturalHeight;
    setMeta(f, size.textContent);
  });
  img.addEventListener("error", () => size.replaceChildren(errorBox(new Error("the browser cannot show this image; download it instead"))));
  body.replaceChildren(size, el("div", { class: "image-box" }, img));
}

// --- PDF: pages rendered on the server
async function renderPDF(f, body, token, opts) {
  const info = await tool("pdf_info", { id: f.id }, QUIET);
  if (!alive(token)) return;
  const pages = info.pages;
  setMeta(f, plural(pages, "page"));
  const nav = el("div", { class: "pager" });
  const frame = el("div", { class: "pdf-page" });
  body.replaceChildren(nav, frame);
  let page = Math.min((opts.keepPlace && current.page) || 1, pages);
  const width = () => {
    const css = Math.max(300, frame.clientWidth || body.clientWidth || 800);
    const px = Math.round((css * (window.devicePixelRatio || 1)) / 200) * 200;
    return Math.max(400, Math.min(2400, px));
  };
  const show = async (n) => {
    page = Math.max(1, Math.min(pages, n));
    current.page = page;
    pager(nav, page, page, pages, 1, "page", show);
    frame.replaceChildren(el("div", { class: "loading" }, `Rendering page ${page}…`));
    try {
      const url = await blobURL(fileURL(f.id, "pages/" + page) + "?width=" + width());
      if (!alive(token)) { URL.revokeObjectURL(url); return; }
      current.urls.push(url);
      const img = el("img", { src: url, alt: `${f.name}, page ${page} of ${pages}`, class: "page-image", "data-page": page });
      frame.replaceChildren(img);
    } catch (e) {
      if (alive(token)) frame.replaceChildren(errorBox(e));
    }
  };
  const keys = (e) => {
    if (e.target.tagName === "INPUT") return;
    if (e.key === "ArrowRight" || e.key === "PageDown") { e.preventDefault(); if (page < pages) show(page + 1); }
    if (e.key === "ArrowLeft" || e.key === "PageUp") { e.preventDefault(); if (page > 1) show(page - 1); }
  };
  $("viewer").addEventListener("keydown", keys);
  current.cleanup.push(() => $("viewer").removeEventListener("keydown", keys));
  await show(page);
}

// --- grids: CSV through the table engine, xlsx through the spreadsheet one
function colName(n) {
  let s = "";
  for (n++; n > 0; n = Math.floor((n - 1) / 26)) s = String.fromCharCode(65 + ((n - 1) % 26)) + s;
  return s;
}

function cellText(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function drawGrid(wrap, header, rows, firstRow, types) {
  const thead = el("thead", {}, el("tr", {}, el("th", { class: "rownum", scope: "col" }, "#"),
    header.map((h, i) => el("th", { scope: "col", title: types && types[i] ? `${h} (${types[i]})` : String(h) }, cellText(h)))));
  const tbody = el("tbody", {}, rows.map((r, i) => el("tr", {}, el("th", { class: "rownum", scope: "row" }, String(firstRow + i)),
    header.map((_, j) => { const v = r[j]; return el("td", { class: typeof v === "number" ? "num" : undefined }, cellText(v)); }))));
  wrap.replaceChildren(el("table", { class: "grid" }, thead, tbody));
  wrap.scrollTop = 0;
}

async function renderGrid(f, body, token, kind) {
  const nav = el("div", { class: "pager" });
  const tabs = el("div", { class: "sheet-tabs", role: "tablist", "aria-label": "Sheets" });
  const wrap = el("div", { class: "grid-wrap", tabindex: "0", "aria-label": "Cells" });
  body.replaceChildren(tabs, nav, wrap);
  // A CSV's first page comes from the streaming reader at once, while the
  // table engine ingests the file; later pages come from table_read_rows
  // (with column types) once it has, from the streaming reader otherwise.
  let table = null;
  if (kind === "csv") {
    table = tool("table_read_rows", { path: f.id, row_start: 1, row_count: 1 }, QUIET).then(() => true, () => false);
  }
  // The first page of the first sheet is asked for at once, beside the
  // sheet list (which counts every sheet's rows: on a big workbook the
  // slower of the two); it is drawn as soon as it arrives.
  const firstPage = tool("spreadsheet_read_range", { id: f.id, sheet: 1, range: `A1:${colName(EARLY_COLUMNS - 1)}${GRID_PAGE + 1}` }, QUIET)
    .then((rows) => {
      if (!alive(token) || wrap.querySelector("table")) return;
      let cols = 0;
      for (const r of rows) for (let j = r.length - 1; j >= cols; j--) if (r[j] !== null && r[j] !== "") { cols = j + 1; break; }
      if (rows.length === 0 || cols === 0) return;
      const header = rows[0].slice(0, cols).map((h, j) => (h === null || h === "" ? colName(j) : h));
      drawGrid(wrap, header, rows.slice(1).map((r) => r.slice(0, cols)), 2);
    }, () => {});
  const sheets = await tool("spreadsheet_list_sheets", { id: f.id }, QUIET);
  await firstPage;
  if (!alive(token)) return;
  const showSheet = async (i) => {
    const s = sheets[i];
    for (const [j, b] of [...tabs.children].entries()) b.setAttribute("aria-selected", String(j === i));
    const cols = Math.max(1, Math.min(s.columns || 1, MAX_COLUMNS));
    const last = colName(cols - 1);
    const head = s.rows > 0 ? await tool("spreadsheet_read_range", { id: f.id, sheet: s.name, range: `A1:${last}1` }, QUIET) : [[]];
    if (!alive(token)) return;
    const header = (head[0] || []).map((h, j) => (h === null || h === "" ? colName(j) : h));
    while (header.length < cols) header.push(colName(header.length));
    const dataRows = Math.max(0, s.rows - 1);
    const load = async (from) => {
      if (dataRows === 0) { drawGrid(wrap, header, [], 2); pager(nav, 1, 0, 0, GRID_PAGE, "row", load); return; }
      const to = Math.min(from + GRID_PAGE - 1, dataRows);
      if (from > 1 && table && (await table)) {
        const r = await tool("table_read_rows", { path: f.id, row_start: from, row_count: GRID_PAGE }, QUIET);
        if (!alive(token)) return;
        drawGrid(wrap, r.columns, r.rows, from + 1, r.column_types);
        pager(nav, from, from + r.rows.length - 1, r.total_rows, GRID_PAGE, "row", load);
        return;
      }
      const rows = await tool("spreadsheet_read_range", { id: f.id, sheet: s.name, range: `A${from + 1}:${last}${to + 1}` }, QUIET);
      if (!alive(token)) return;
      drawGrid(wrap, header, rows, from + 1);
      pager(nav, from, to, dataRows, GRID_PAGE, "row", load);
    };
    setMeta(f, `${plural(sheets.length, "sheet")} · ${s.name}: ${plural(s.rows, "row")} × ${plural(s.columns, "column")}` +
      (s.columns > MAX_COLUMNS ? ` (first ${MAX_COLUMNS} shown)` : ""));
    await load(1);
  };
  tabs.replaceChildren(...sheets.map((s, i) => el("button", { type: "button", role: "tab", class: "sheet-tab", "aria-selected": "false",
    title: s.name, onclick: () => showSheet(i).catch((e) => alive(token) && wrap.replaceChildren(errorBox(e))) }, s.name)));
  tabs.hidden = sheets.length < 2 && kindOf(f) === "csv";
  if (sheets.length === 0) { wrap.replaceChildren(el("div", { class: "note" }, "This workbook has no sheets.")); return; }
  await showSheet(0);
}
