// metaclaw workspace page: a live file list (SSE read with fetch so that a
// bearer token can be sent), drag-and-drop uploads with progress, text
// preview, markdown conversion, download and delete. No framework.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { files: new Map(), token: localStorage.getItem("metaclaw.token") || "", lastEventId: "", filter: "" };

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (state.token) h["Authorization"] = "Bearer " + state.token;
  return h;
}

async function api(path, opts) {
  opts = opts || {};
  const res = await fetch(path, Object.assign({}, opts, { headers: authHeaders(opts.headers) }));
  if (res.status === 401) { askToken(); throw new Error("this server needs a token"); }
  const body = res.headers.get("Content-Type")?.includes("json") ? await res.json() : null;
  if (!res.ok) throw new Error(body?.error ? body.error.code + ": " + body.error.message : res.status + " " + res.statusText);
  return body;
}

function toast(msg, isErr) {
  const t = $("toast");
  t.textContent = msg;
  t.className = "toast" + (isErr ? " err" : "");
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), isErr ? 6000 : 2500);
}

function human(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KB";
  return n + " B";
}

function iconType(f) {
  const ext = (f.name.split(".").pop() || "").toLowerCase();
  const byExt = { md: "md", markdown: "md", pdf: "pdf", csv: "csv", tsv: "csv", xlsx: "xlsx", xls: "xlsx", docx: "docx",
    json: "json", js: "code", ts: "code", py: "code", go: "code", txt: "text", log: "text", zip: "archive" };
  if (byExt[ext]) return byExt[ext];
  const m = f.mime_type || "";
  if (m.startsWith("image/")) return "image";
  if (m.startsWith("text/")) return "text";
  return "file";
}

const isMarkdown = (f) => /\.(md|markdown)$/i.test(f.name);

function render() {
  const rows = $("rows");
  const list = [...state.files.values()].filter((f) => !state.filter || f.name.toLowerCase().includes(state.filter))
    .sort((a, b) => a.name.localeCompare(b.name));
  rows.replaceChildren(...list.map(rowFor));
  $("empty").hidden = state.files.size > 0;
  let total = 0;
  state.files.forEach((f) => (total += f.size || 0));
  $("summary").textContent = state.files.size ? `${state.files.size} file${state.files.size === 1 ? "" : "s"} · ${human(total)}` : "";
}

function rowFor(f) {
  const tr = document.createElement("tr");
  tr.dataset.id = f.id;
  if (f.flash) { tr.className = "flash"; f.flash = false; }
  const kind = iconType(f);
  const cell = (cls, text) => { const td = document.createElement("td"); td.className = cls; if (text !== undefined) td.textContent = text; return td; };
  const icon = cell("icon");
  const badge = document.createElement("span");
  badge.className = "badge " + kind;
  badge.textContent = kind === "file" ? (f.name.split(".").pop() || "file").slice(0, 4) : kind;
  icon.append(badge);
  const name = cell("name", f.name);
  if (f.source) { const s = document.createElement("span"); s.className = "src"; s.textContent = f.source; name.append(s); }
  const mod = f.modified_on ? new Date(f.modified_on) : null;
  const actions = cell("actions");
  const btn = (label, fn, cls) => { const b = document.createElement("button"); b.type = "button"; b.textContent = label; if (cls) b.className = cls; b.onclick = fn; actions.append(b); };
  if (/^text\/|json|javascript|xml|yaml/.test(f.mime_type || "")) btn("Preview", () => preview(f));
  if (isMarkdown(f)) { btn("→ PDF", () => convert(f, "pdf")); btn("→ DOCX", () => convert(f, "docx")); }
  btn("Download", () => download(f));
  btn("Delete", () => remove(f), "del");
  tr.append(icon, name, cell("num", f.size === undefined ? "" : human(f.size)), cell("type", f.mime_type || ""),
    cell("mod", mod ? mod.toLocaleString() : ""), actions);
  return tr;
}

async function load() {
  const body = await api("/api/files");
  state.files.clear();
  for (const f of body.files) state.files.set(f.id, f);
  if (body.workspace) $("ws").textContent = body.workspace;
  render();
}

function apply(type, data) {
  // Events were lost while we were away: the list may be stale, reload it.
  if (type === "events:gap") { load().catch(() => {}); return; }
  const cur = state.files.get(data.id) || {};
  if (type === "file:deleted") state.files.delete(data.id);
  else state.files.set(data.id, Object.assign(cur, data, { flash: true }, type === "file:created" ? { modified_on: new Date().toISOString() } : {}));
  render();
}

// Server-Sent Events over fetch (EventSource cannot send a bearer token).
async function listen() {
  const status = $("status");
  for (let delay = 500; ; delay = Math.min(delay * 2, 10000)) {
    try {
      const headers = authHeaders({ Accept: "text/event-stream" });
      if (state.lastEventId) headers["Last-Event-ID"] = state.lastEventId;
      const res = await fetch("/api/events", { headers });
      if (res.status === 401) { askToken(); status.className = "status down"; $("status-text").textContent = "needs token"; started = false; return; }
      if (!res.ok || !res.body) throw new Error("events: " + res.status);
      status.className = "status live";
      $("status-text").textContent = "live";
      delay = 500;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          let ev = "message", data = "", id = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event: ")) ev = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) id = line.slice(4);
          }
          if (id) state.lastEventId = id;
          if (ev.startsWith("file:") && data) apply(ev, JSON.parse(data));
        }
      }
    } catch (e) {
      console.warn(e);
    }
    status.className = "status down";
    $("status-text").textContent = "reconnecting…";
    await new Promise((r) => setTimeout(r, delay));
  }
}

function upload(file) {
  const row = document.createElement("div");
  row.className = "upload";
  const label = document.createElement("span");
  label.textContent = file.name;
  const bar = document.createElement("progress");
  bar.max = file.size || 1;
  bar.value = 0;
  const pct = document.createElement("span");
  pct.textContent = human(file.size);
  row.append(label, bar, pct);
  $("uploads").append(row);
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/files/upload?name=" + encodeURIComponent(file.name) + "&overwrite=true");
    if (state.token) xhr.setRequestHeader("Authorization", "Bearer " + state.token);
    xhr.upload.onprogress = (e) => { bar.value = e.loaded; pct.textContent = Math.round((e.loaded / (e.total || 1)) * 100) + "%"; };
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch (_) {}
      if (xhr.status === 401) askToken();
      if (xhr.status >= 200 && xhr.status < 300) { row.remove(); toast("Uploaded " + body.name); }
      else { row.classList.add("err"); pct.textContent = body?.error?.code || xhr.status; label.textContent = file.name + " — " + (body?.error?.message || "failed"); setTimeout(() => row.remove(), 8000); }
      resolve();
    };
    xhr.onerror = () => { row.classList.add("err"); pct.textContent = "network error"; resolve(); };
    const form = new FormData();
    form.append("file", file, file.name);
    xhr.send(form);
  });
}

async function uploadAll(list) {
  for (const f of list) await upload(f);
}

async function download(f) {
  try {
    const res = await fetch("/api/files/" + encodeURIComponent(f.id) + "/download", { headers: authHeaders() });
    if (!res.ok) throw new Error((await res.json()).error.message);
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = f.name.split("/").pop();
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 30000);
  } catch (e) { toast(e.message, true); }
}

async function remove(f) {
  if (!confirm(`Delete ${f.name}?`)) return;
  try { await api("/api/files/" + encodeURIComponent(f.id), { method: "DELETE" }); toast("Deleted " + f.name); }
  catch (e) { toast(e.message, true); }
}

async function preview(f) {
  try {
    const body = await api("/api/files/" + encodeURIComponent(f.id) + "/content");
    $("preview-name").textContent = body.file_path;
    $("preview-body").textContent = body.content ?? "(binary or large file — use Download)";
    $("preview").hidden = false;
    $("preview").scrollIntoView({ behavior: "smooth" });
  } catch (e) { toast(e.message, true); }
}

async function convert(f, type) {
  try {
    const body = await api("/api/files/" + encodeURIComponent(f.id) + "/convert", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ convert_type: type }) });
    toast("Created " + body.name);
  } catch (e) { toast(e.message, true); }
}

function askToken() {
  const d = $("token-dialog");
  if (d.open) return;
  $("token-input").value = state.token;
  d.showModal();
}

function setup() {
  $("file-input").onchange = (e) => { uploadAll([...e.target.files]); e.target.value = ""; };
  $("filter").oninput = (e) => { state.filter = e.target.value.toLowerCase(); render(); };
  $("preview-close").onclick = () => ($("preview").hidden = true);
  $("token-btn").onclick = askToken;
  $("token-dialog").addEventListener("close", () => {
    if ($("token-dialog").returnValue !== "ok") return;
    state.token = $("token-input").value.trim();
    localStorage.setItem("metaclaw.token", state.token);
    start();
  });
  let depth = 0;
  const dz = $("dropzone");
  window.addEventListener("dragenter", (e) => { if (e.dataTransfer?.types?.includes("Files")) { depth++; dz.hidden = false; e.preventDefault(); } });
  window.addEventListener("dragleave", () => { if (--depth <= 0) { depth = 0; dz.hidden = true; } });
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => {
    e.preventDefault();
    depth = 0;
    dz.hidden = true;
    if (e.dataTransfer?.files?.length) uploadAll([...e.dataTransfer.files]);
  });
}

let started = false;
async function start() {
  try { await load(); } catch (e) { toast(e.message, true); return; }
  if (!started) { started = true; listen(); }
}

setup();
start();
