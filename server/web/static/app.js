// metaclaw workspace page: the live file list (file events over SSE),
// uploads by drop or picker that ask before replacing, the viewer, the run
// feed and the script console, and how to connect an agent. Plain ES
// modules, no framework, nothing fetched from elsewhere.
//
// Only what draws the list loads before the first render (this module,
// api.js, ui.js); the viewer, the run feed and the console are imported on
// first use, or when the browser is idle after the list is drawn.
import { api, auth, raw, tool, stream, setToken, fileURL } from "./api.js";
import { $, el, toast, human, kindOf, ask, plural, formatTime } from "./ui.js";

const state = { files: new Map(), filter: "", authRequired: false, streams: [], live: { files: false, runs: false } };

// --- modules loaded on first use (each once; the promise is kept)
const once = (load) => { let p = null; return () => (p = p || load()); };
let viewerMod = null; // the loaded viewer.js, once it is
const loadViewer = once(() => import("./viewer.js").then((v) => {
  v.setViewerActions({ download, saveToDisk, revert, remove });
  v.setupViewer();
  viewerMod = v;
  return v;
}));
const loadFeed = once(() => import("./feed.js").then((m) => {
  m.setFeedHooks({ openFile: openById, onArtifact: (a) => {
    if (a.action === "deleted") { state.files.delete(a.id); render(); return; }
    // seed 002: upsert the artifact by path into the panel at once
    upsert({ id: a.id, name: a.path.replace(/^\//, ""), size: a.size, mime_type: a.mime_type, source: a.source, icon_type: a.icon_type, flash: true });
  } });
  return m;
}));
const loadConsole = once(() => import("./console.js").then((c) => {
  c.setConsoleHooks({ openFile: openById });
  c.setupConsole();
  return c;
}));
const failed = (e) => toast("The page could not load a part of itself: " + e.message, true);

const openViewer = (f, opts) => loadViewer().then((v) => v.openViewer(f, opts), failed);
const viewerFile = () => (viewerMod ? viewerMod.viewerFile() : null);
const closeViewer = () => viewerMod && viewerMod.closeViewer();
const refreshViewer = (f) => viewerMod && viewerMod.refreshViewer(f);

// --- the list
const byName = () => new Map([...state.files.values()].map((f) => [f.name, f]));

function fromHistory(w) {
  return { id: w.id, name: w.path.replace(/^\//, ""), size: w.size, mime_type: w.mime_type, modified_on: w.modified_on, source: w.source,
    has_backup: w.has_backup, session_id: w.session_id, message_id: w.message_id, icon_type: w.icon_type };
}

let renderQueued = false;
function render() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; renderNow(); });
}

// renderNow draws the list: the first rows at once (what a screen shows),
// the rest in chunks once those are painted, so that a workspace of
// thousands of files is usable as soon as it arrives.
const FIRST_ROWS = 50, CHUNK_ROWS = 200;
let renderGen = 0;
function renderNow() {
  const gen = ++renderGen;
  const q = state.filter;
  const list = [...state.files.values()].filter((f) => !q || f.name.toLowerCase().includes(q)).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const box = $("filelist");
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest(".file-row");
  const focusId = focused ? focused.dataset.id : null;
  box.replaceChildren(...list.slice(0, FIRST_ROWS).map(rowFor));
  const more = (from) => {
    if (gen !== renderGen || from >= list.length) { box.dataset.complete = "1"; return; }
    const frag = document.createDocumentFragment();
    for (const f of list.slice(from, from + CHUNK_ROWS)) frag.append(rowFor(f));
    box.append(frag);
    setTimeout(() => more(from + CHUNK_ROWS), 0);
  };
  box.dataset.complete = list.length <= FIRST_ROWS ? "1" : "";
  if (list.length > FIRST_ROWS) afterPaint(() => more(FIRST_ROWS));
  if (focusId) { const r = box.querySelector(`[data-id="${CSS.escape(focusId)}"]`); if (r) r.focus(); }
  $("empty").hidden = state.files.size > 0;
  let total = 0;
  state.files.forEach((f) => (total += f.size || 0));
  $("summary").textContent = state.files.size ? `${plural(state.files.size, "file")} · ${human(total)}` : "";
}

// afterPaint runs fn after the next frame (or soon, in a tab that draws
// no frames): the first rows are shown before the rest are built.
function afterPaint(fn) {
  let done = false;
  const go = () => { if (!done) { done = true; setTimeout(fn, 0); } };
  requestAnimationFrame(go);
  setTimeout(go, 100);
}

// rowFor builds a file's row from a template (cloning is cheaper than
// building each element); the list's own listeners handle its clicks and
// keys (see setupList), so a row carries none.
let rowTemplate = null;
function rowFor(f) {
  if (!rowTemplate) {
    rowTemplate = el("div", { class: "file-row", role: "listitem", tabindex: "0" },
      el("span", { class: "badge", "aria-hidden": "true" }),
      el("div", { class: "main" }, el("button", { type: "button", class: "name", "data-act": "open" }),
        el("div", { class: "meta" }, el("span", { class: "size" }), el("span", { class: "type" }), el("span", { class: "mod" }))),
      el("div", { class: "actions" }, el("button", { type: "button", class: "ghost small", "data-act": "download" }, "Download"),
        el("button", { type: "button", class: "danger small", "data-act": "remove" }, "Delete")));
  }
  const row = rowTemplate.cloneNode(true);
  const [badge, main, actions] = row.children;
  const kind = kindOf(f);
  badge.className = "badge " + kind;
  badge.textContent = kind === "file" ? ((f.name.split(".").pop() || "file").slice(0, 4)) : kind;
  const [name, meta] = main.children;
  name.title = f.name;
  name.textContent = f.name;
  const [size, type, mod] = meta.children;
  size.textContent = human(f.size);
  type.title = f.mime_type || "";
  type.textContent = f.mime_type || "";
  mod.textContent = formatTime(f.modified_on);
  if (f.source) meta.append(el("span", { class: "src src-" + f.source }, f.source === "upload" ? "uploaded" : "generated"));
  const [dl, del] = actions.children;
  dl.setAttribute("aria-label", "Download " + f.name);
  del.setAttribute("aria-label", "Delete " + f.name);
  if (f.has_backup) del.before(el("button", { type: "button", class: "ghost small", "data-act": "revert", "aria-label": "Revert " + f.name }, "Revert"));
  if (f.flash) row.classList.add("flash");
  row.dataset.id = f.id;
  row.dataset.name = f.name;
  row.setAttribute("aria-label", `${f.name}, ${human(f.size)}`);
  f.flash = false;
  return row;
}

// setupList handles the rows' buttons and keys for the whole list.
function setupList() {
  const box = $("filelist");
  const fileOf = (node) => { const row = node.closest(".file-row"); return row ? state.files.get(row.dataset.id) : null; };
  const acts = { open: (f) => openViewer(f), download, revert, remove };
  box.addEventListener("click", (e) => {
    const b = e.target.closest("button[data-act]");
    const f = b && fileOf(b);
    if (f) acts[b.dataset.act](f);
  });
  box.addEventListener("keydown", (e) => {
    const row = e.target;
    if (!row.classList.contains("file-row")) return;
    const f = state.files.get(row.dataset.id);
    if (!f) return;
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); openViewer(f); }
    else if (e.key === "Delete") { e.preventDefault(); remove(f); }
    else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const sib = e.key === "ArrowDown" ? row.nextElementSibling : row.previousElementSibling;
      if (sib) sib.focus();
    }
  });
}

function upsert(f) {
  const cur = state.files.get(f.id) || {};
  state.files.set(f.id, Object.assign(cur, f));
  render();
  const open = viewerFile();
  if (open && open.id === f.id) return state.files.get(f.id);
  return null;
}

// history reads GET /api/history; the first time, the answer boot.js
// asked for (and parsed) while the modules loaded. If that failed (a 401),
// it asks again, so that the error is handled as any other.
async function history() {
  const early = window.__history;
  window.__history = null;
  if (early) {
    const body = await early.catch(() => null);
    if (body && body.workspace) return body;
  }
  return api("/api/history");
}

async function load() {
  const h = await history();
  performance.mark("history-loaded");
  state.files.clear();
  for (const w of h.workspace.workspace_files) { const f = fromHistory(w); state.files.set(f.id, f); }
  $("ws").textContent = h.workspace.name;
  state.authRequired = !!h.workspace.auth_required;
  renderNow();
  const first = !document.documentElement.dataset.ready;
  if (first) {
    performance.mark("list-interactive");
    // Element Timing tells when the first row is on screen (the benchmark reads it).
    const name = document.querySelector("#filelist .file-row .name");
    if (name) name.setAttribute("elementtiming", "first-row");
  }
  (await loadFeed()).restore(h.messages);
  if (first) {
    document.documentElement.dataset.ready = "1";
    // The rest of the page, while nobody needs it yet.
    const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 200));
    idle(() => { loadViewer().catch(() => {}); loadConsole().catch(() => {}); });
  }
}

// Metadata an event does not carry (source, backup): read it for the few
// files that changed; after a burst, reload the whole list instead.
const pendingInfo = new Set();
let infoTimer = null;
function refreshInfo(id) {
  pendingInfo.add(id);
  if (infoTimer) return;
  infoTimer = setTimeout(async () => {
    infoTimer = null;
    const ids = [...pendingInfo];
    pendingInfo.clear();
    if (ids.length > 50) { load().catch(() => {}); return; }
    await Promise.all(ids.map(async (id) => {
      if (!state.files.has(id)) return;
      try {
        const i = await api(fileURL(id));
        const changed = upsert({ id, name: i.name, size: i.size, mime_type: i.mime_type, modified_on: i.modified_on, source: i.source === "upload" ? "upload" : "generated",
          has_backup: i.has_backup, icon_type: i.icon_type });
        if (changed) refreshViewer(changed);
      } catch (_) { /* deleted meanwhile */ }
    }));
  }, 120);
}

function fileEvent(type, data) {
  if (type === "events:gap") { load().catch(() => {}); return; }
  if (!type.startsWith("file:")) return;
  if (type === "file:deleted") {
    state.files.delete(data.id);
    const open = viewerFile();
    if (open && open.id === data.id) { closeViewer(); toast(open.name + " was deleted"); }
    render();
    return;
  }
  upsert(Object.assign({}, data, { flash: true }, type === "file:created" ? { modified_on: new Date().toISOString() } : {}));
  refreshInfo(data.id);
}

function setLive(which, s) {
  state.live[which] = s === "live";
  const all = state.live.files && state.live.runs;
  $("status").className = "status " + (all ? "live" : s === "unauthorized" ? "down" : "down");
  $("status-text").textContent = all ? "live" : s === "unauthorized" ? "needs token" : "connecting…";
  document.documentElement.dataset.live = all ? "1" : "";
}

// --- uploads
function freeName(name) {
  const taken = byName();
  const dot = name.lastIndexOf(".");
  const stem = dot > 0 ? name.slice(0, dot) : name, ext = dot > 0 ? name.slice(dot) : "";
  for (let n = 1; ; n++) {
    const c = `${stem} (${n})${ext}`;
    if (!taken.has(c)) return c;
  }
}

async function uploadAll(list) {
  let policy = null;
  for (const file of list) {
    let name = file.name, overwrite = false;
    if (byName().has(name)) {
      let choice = policy;
      if (!choice) {
        const r = await ask(`Replace “${name}”?`, `A file named “${name}” is already in this workspace. Replace it (the current version is lost), or keep both under a new name?`,
          [{ value: "skip", label: "Skip" }, { value: "keep", label: "Keep both" }, { value: "replace", label: "Replace", primary: true }], { all: list.length > 1 });
        choice = r.value === "cancel" || !r.value ? "skip" : r.value;
        if (r.all) policy = choice;
      }
      if (choice === "skip") continue;
      if (choice === "replace") overwrite = true;
      else name = freeName(name);
    }
    await upload(file, name, overwrite);
  }
}

function upload(file, name, overwrite) {
  const label = el("span", { class: "up-name", title: name }, name);
  const bar = el("progress", { max: file.size || 1, value: 0 });
  const pct = el("span", { class: "up-pct" }, human(file.size));
  const row = el("div", { class: "upload" }, label, bar, pct);
  $("uploads").append(row);
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/files/upload?name=" + encodeURIComponent(name) + "&overwrite=" + overwrite);
    if (auth.token) xhr.setRequestHeader("Authorization", "Bearer " + auth.token);
    xhr.setRequestHeader("X-Session-Id", auth.session);
    xhr.upload.onprogress = (e) => { bar.value = e.loaded; pct.textContent = Math.round((e.loaded / (e.total || 1)) * 100) + "%"; };
    xhr.onload = async () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (_) { /* not JSON */ }
      if (xhr.status === 401) auth.onUnauthorized();
      if (xhr.status === 409 && !overwrite) {
        // Someone took the name meanwhile: keep both under the next free one.
        row.remove();
        await upload(file, freeName(name), false);
        resolve();
        return;
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        row.remove();
        toast("Uploaded " + body.name);
        upsert({ id: body.id, name: body.name, size: body.size, mime_type: body.mime_type, source: "upload", modified_on: new Date().toISOString(), flash: true });
        refreshInfo(body.id);
      } else {
        row.classList.add("err");
        pct.textContent = (body && body.error && body.error.code) || String(xhr.status);
        label.textContent = name + " — " + ((body && body.error && body.error.message) || "failed");
        setTimeout(() => row.remove(), 8000);
      }
      resolve();
    };
    xhr.onerror = () => { row.classList.add("err"); pct.textContent = "network error"; resolve(); };
    const form = new FormData();
    form.append("file", file, name);
    xhr.send(form);
  });
}

// --- file actions
async function download(f) {
  try {
    const res = await raw(fileURL(f.id, "download"));
    const blob = await res.blob();
    (await loadFeed()).downloadBlob(blob, f.name);
  } catch (e) { toast(e.message, true); }
}

async function saveToDisk(f) {
  try {
    const res = await raw(fileURL(f.id, "download"));
    const blob = await res.blob();
    const r = await (await loadFeed()).saveBlob(blob, f.name.split("/").pop(), f.mime_type);
    if (r.ok) toast("Saved " + f.name);
    else if (r.error) toast(r.error, true);
  } catch (e) { toast(e.message, true); }
}

async function revert(f) {
  const c = await ask(`Revert “${f.name}”?`, "This restores the version from before its last change (one level of undo). The current content is replaced.",
    [{ value: "cancel", label: "Cancel" }, { value: "revert", label: "Revert", primary: true }]);
  if (c !== "revert") return;
  try {
    const r = await tool("file_revert", { id: f.id });
    toast("Reverted " + r.name);
    const cur = upsert({ id: f.id, size: r.size, has_backup: false, modified_on: new Date().toISOString() });
    if (cur) refreshViewer(cur);
    refreshInfo(f.id);
  } catch (e) { toast(e.message, true); }
}

async function remove(f) {
  const c = await ask(`Delete “${f.name}”?`, "The file and its backup are removed from the workspace. This cannot be undone.",
    [{ value: "cancel", label: "Cancel" }, { value: "delete", label: "Delete", danger: true }]);
  if (c !== "delete") return;
  try {
    await api(fileURL(f.id), { method: "DELETE" });
    toast("Deleted " + f.name);
    state.files.delete(f.id);
    const open = viewerFile();
    if (open && open.id === f.id) closeViewer();
    render();
  } catch (e) { toast(e.message, true); }
}

function openById(id) {
  const f = state.files.get(id);
  if (f) return openViewer(f);
  api(fileURL(id)).then((i) => openViewer({ id: i.id, name: i.name, size: i.size, mime_type: i.mime_type, has_backup: i.has_backup }))
    .catch((e) => toast(e.message, true));
}

// --- connect an agent
function fillConnect() {
  const origin = location.origin;
  $("mcp-url").textContent = origin + "/mcp";
  const tok = auth.token ? "YOUR_TOKEN" : "";
  $("token-info").replaceChildren(state.authRequired
    ? el("span", {}, "This server needs a bearer token (", el("code", {}, "Authorization: Bearer TOKEN"), "). ",
      auth.token ? "This browser has one saved (…" + auth.token.slice(-4) + ")." : "Ask its operator for one (metaclaw serve --token SECRET:WORKSPACE).")
    : el("span", {}, "None: this server listens on loopback without tokens."));
  const cfg = { mcpServers: { metaclaw: { type: "http", url: origin + "/mcp" } } };
  if (state.authRequired) cfg.mcpServers.metaclaw.headers = { Authorization: "Bearer " + (tok || "TOKEN") };
  $("mcp-config").textContent = JSON.stringify(cfg, null, 2);
  const some = [...state.files.values()].find((f) => /\.(md|txt|csv)$/i.test(f.name));
  const authLine = state.authRequired ? ` \\\n  -H 'Authorization: Bearer TOKEN'` : "";
  $("curl-example").textContent = `curl -s ${origin}/api/tools/file_read_text${authLine} \\\n  -H 'Content-Type: application/json' \\\n  -d '${JSON.stringify({ id: some ? some.name : "notes.md", start_line: 1, end_line: 20 })}'`;
}

// --- setup
function askToken() {
  const d = $("token-dialog");
  if (d.open) return;
  $("token-input").value = auth.token;
  d.showModal();
}

function setupTabs() {
  const tabs = [$("tab-runs"), $("tab-console")];
  const select = (t) => {
    for (const x of tabs) {
      const on = x === t;
      x.setAttribute("aria-selected", String(on));
      x.tabIndex = on ? 0 : -1;
      $(x.getAttribute("aria-controls")).hidden = !on;
    }
  };
  tabs.forEach((t, i) => {
    t.addEventListener("click", () => select(t));
    t.addEventListener("keydown", (e) => {
      if (e.key === "ArrowRight" || e.key === "ArrowLeft") { const n = tabs[(i + (e.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length]; select(n); n.focus(); }
    });
  });
  select(tabs[0]);
}

function setup() {
  auth.onUnauthorized = askToken;
  setupList();
  setupTabs();
  // The console's module loads when its tab opens; Run waits for it.
  $("tab-console").addEventListener("click", () => loadConsole().catch(failed));
  $("run-btn").addEventListener("click", () => loadConsole().then((c) => c.run(), failed));
  $("file-input").onchange = (e) => { uploadAll([...e.target.files]); e.target.value = ""; };
  $("upload-label").addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); $("file-input").click(); } });
  $("filter").oninput = (e) => { state.filter = e.target.value.toLowerCase(); render(); };
  $("token-btn").onclick = askToken;
  $("connect-btn").onclick = () => { fillConnect(); $("connect").showModal(); };
  for (const b of document.querySelectorAll("[data-copy]")) {
    b.addEventListener("click", () => {
      const text = $(b.dataset.copy).textContent;
      navigator.clipboard.writeText(text).then(() => toast("Copied"), () => toast("Copy failed: select the text instead", true));
    });
  }
  $("token-dialog").addEventListener("close", () => {
    if ($("token-dialog").returnValue !== "ok") return;
    setToken($("token-input").value.trim());
    start();
  });
  let depth = 0;
  const dz = $("dropzone");
  const hasFiles = (e) => e.dataTransfer && [...(e.dataTransfer.types || [])].includes("Files");
  window.addEventListener("dragenter", (e) => { if (hasFiles(e)) { depth++; dz.hidden = false; e.preventDefault(); } });
  window.addEventListener("dragleave", () => { if (--depth <= 0) { depth = 0; dz.hidden = true; } });
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => {
    e.preventDefault();
    depth = 0;
    dz.hidden = true;
    if (e.dataTransfer && e.dataTransfer.files && e.dataTransfer.files.length) uploadAll([...e.dataTransfer.files]);
  });
}

async function start() {
  for (const stop of state.streams) stop();
  state.streams = [];
  try { await load(); } catch (e) { toast(e.message, true); return; }
  state.streams.push(stream("/api/events", fileEvent, (s) => setLive("files", s)));
  state.streams.push(stream("/api/runs/events", (type, data) => {
    if (type === "feed:gap") { load().catch(() => {}); return; }
    loadFeed().then((m) => m.frame(type, data));
  }, (s) => setLive("runs", s)));
}

setup();
start();
