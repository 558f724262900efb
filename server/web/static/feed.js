// The live run feed (seed 002): every call a door served — a script run, a
// meta-tool call over HTTP or MCP — as a message whose blocks stream in:
// the tool_use, a tool_result with an artifact for each file it touched,
// the closing tool_result, an attachments block and message_stop. After a
// reload GET /api/history restores it. Frontend-executed results (seed 004)
// arrive in message_stop as instructions; the page carries them out.
import { api, auth, raw, fileURL } from "./api.js";
import { $, el, toast, human, formatTime } from "./ui.js";

const MAX_SHOWN = 100;
const runs = new Map(); // message id → {msg, node}
const handled = new Set(); // instruction ids this page has acted on
let hooks = { openFile: () => {}, onArtifact: () => {} };

export function setFeedHooks(h) { hooks = Object.assign(hooks, h); }

// restore draws the feed from the history's messages (oldest first).
export function restore(messages) {
  runs.clear();
  $("feed").replaceChildren();
  for (const m of messages) {
    const r = { msg: m, node: null };
    runs.set(m.id, r);
    draw(r);
  }
  trim();
  for (const m of messages) for (const i of m.instructions || []) if (i.status !== "pending") handled.add(i.id);
}

// frame applies one streamed frame.
export function frame(type, data) {
  if (type === "message_start") {
    const m = Object.assign({ content: [], attachments: [], status: "running" }, data.message);
    const r = { msg: m, node: null };
    runs.set(m.id, r);
    draw(r);
    trim();
    return;
  }
  const r = runs.get(data.message_id);
  if (!r) return;
  const m = r.msg;
  if (type === "content_block_start") {
    const b = data.content_block;
    m.content[data.index] = b;
    if (b.type === "tool_result" && b.artifact) hooks.onArtifact(b.artifact, m);
    if (b.type === "attachments") m.attachments = b.files;
    draw(r);
  } else if (type === "message_stop") {
    m.status = data.status;
    m.duration_ms = data.duration_ms;
    m.error = data.error;
    m.instructions = data.instructions || [];
    m.host_calls = data.host_calls;
    draw(r);
    for (const i of m.instructions) maybeCarryOut(i);
  } else if (type === "instruction_result") {
    const list = m.instructions || [];
    const i = list.findIndex((x) => x.id === data.instruction.id);
    if (i >= 0) list[i] = data.instruction;
    handled.add(data.instruction.id);
    draw(r);
  }
}

function trim() {
  const ol = $("feed");
  while (ol.children.length > MAX_SHOWN) ol.lastElementChild.remove();
}

const doorLabel = (m) => (m.kind === "script" ? "script" : "tool") + " · " + (m.door || "");

function draw(r) {
  const m = r.msg;
  const mine = m.session_id === auth.session;
  const status = m.status === "running" ? "running…" : m.status === "ok" ? "ok" : (m.error && m.error.code) || "error";
  const head = el("div", { class: "run-head" },
    el("span", { class: "run-name", title: m.name }, m.name),
    el("span", { class: "badge-status " + m.status }, status),
    el("span", { class: "run-meta" }, doorLabel(m), mine ? " · you" : m.session_id ? " · " + m.session_id : "",
      m.duration_ms !== undefined && m.status !== "running" ? ` · ${Math.round(m.duration_ms)} ms` : ""));
  const body = [];
  const use = m.content.find((b) => b && b.type === "tool_use" && !b.host_call);
  if (use) {
    const input = use.input && use.input.code !== undefined ? use.input.code : JSON.stringify(use.input);
    body.push(el("details", { class: "run-input" }, el("summary", {}, m.kind === "script" ? "code" : "arguments"), el("pre", {}, input)));
  }
  const arts = m.content.filter((b) => b && b.type === "tool_result" && b.artifact).map((b) => b.artifact);
  if (arts.length) {
    body.push(el("ul", { class: "artifacts" }, arts.map((a) => el("li", { class: "artifact " + a.action, "data-name": a.filename },
      el("span", { class: "badge " + a.icon_type }, a.icon_type), " ",
      a.action === "deleted" ? el("span", { class: "gone" }, a.path.slice(1)) :
        el("button", { type: "button", class: "link", onclick: () => hooks.openFile(a.id) }, a.path.slice(1)),
      el("span", { class: "action" }, a.action)))));
  }
  const calls = hostCalls(m);
  if (calls) body.push(calls);
  if (m.error) body.push(el("div", { class: "error-box" }, el("strong", {}, m.error.code), " ", m.error.message));
  if (m.attachments && m.attachments.length) {
    body.push(el("div", { class: "attachments", "aria-label": "Files" }, m.attachments.map((a) =>
      el("button", { type: "button", class: "file-card", title: a.path, onclick: () => hooks.openFile(a.id) },
        el("span", { class: "badge " + a.icon_type }, a.icon_type), el("span", { class: "card-name" }, a.filename),
        el("span", { class: "card-size" }, human(a.size))))));
  }
  for (const i of m.instructions || []) body.push(instructionCard(i));
  const node = el("li", { class: "run " + m.status, "data-id": m.id, "data-name": m.name }, head, ...body);
  if (r.node && r.node.isConnected) r.node.replaceWith(node);
  else $("feed").prepend(node);
  r.node = node;
}

// hostCalls lists the operations a script called (files.readText, …),
// each with its summarised arguments, outcome and time; the server streams
// the first 100 of a run and counts the rest.
function hostCalls(m) {
  const results = new Map();
  for (const b of m.content) if (b && b.host_call && b.type === "tool_result") results.set(b.tool_use_id, b);
  const uses = m.content.filter((b) => b && b.host_call && b.type === "tool_use");
  if (!uses.length) return null;
  const total = Math.max(m.host_calls || 0, uses.length);
  const more = total - uses.length;
  const items = uses.map((u) => {
    const r = results.get(u.id);
    const status = !r ? "running" : r.status === "error" ? (r.error && r.error.code) || "error" : "ok";
    const title = JSON.stringify(u.input) + (r ? "\n→ " + JSON.stringify(r.status === "error" ? r.error : r.content) : "");
    return el("li", { class: "host-call " + (r ? r.status : "running"), title },
      el("code", {}, u.name), " ", el("span", { class: "host-args" }, brief(u.input)),
      el("span", { class: "run-meta" }, " · " + status + (r && r.duration_ms !== undefined ? ` · ${r.duration_ms.toFixed(1)} ms` : "")));
  });
  if (more > 0) items.push(el("li", { class: "host-call more" }, `… and ${more} more`));
  return el("details", { class: "host-calls" }, el("summary", {}, `${total} host call${total === 1 ? "" : "s"}`), el("ol", {}, items));
}

// brief is one short line of a host call's arguments.
function brief(input) {
  if (!input || typeof input !== "object") return "";
  const s = Object.entries(input).map(([k, v]) => k + ": " + JSON.stringify(v)).join(", ");
  return s.length > 120 ? s.slice(0, 119) + "…" : s;
}

function instructionCard(i) {
  const what = i.file ? i.file.path.slice(1) : "text";
  const text = `Save ${what} to your disk as ${i.suggested_name}`;
  const card = el("div", { class: "instruction " + i.status, "data-instruction": i.id, "data-status": i.status }, el("span", {}, text));
  if (i.status === "pending") {
    card.append(el("button", { type: "button", class: "primary small", onclick: () => carryOut(i) }, "Save…"),
      el("button", { type: "button", class: "ghost small", onclick: () => report(i, "cancelled", "") }, "Dismiss"));
  } else {
    card.append(el("span", { class: "instruction-status" }, i.status + (i.method ? ` (${i.method.replace(/_/g, " ")})` : "") +
      (i.error ? ": " + i.error.message : "")));
  }
  return card;
}

// maybeCarryOut acts at once on instructions from this tab's own calls;
// those from other sessions (an agent over MCP) wait for a click.
export function maybeCarryOut(i) {
  if (i.status !== "pending" || handled.has(i.id) || i.session_id !== auth.session) return;
  carryOut(i);
}

async function report(i, status, method, error) {
  handled.add(i.id);
  try {
    await api("/api/instructions/" + encodeURIComponent(i.id), { json: { status, method, error: error || "" } });
  } catch (e) {
    if (e.code !== "ALREADY_EXISTS") toast(e.message, true);
  }
}

async function bodyOf(i) {
  if (i.file) return (await raw(fileURL(i.file.id, "download"))).blob();
  return new Blob([i.content || ""], { type: i.mime_type || "text/plain" });
}

// carryOut saves an instruction's file on the user's disk: through the File
// System Access API where the browser has it (the user picks where), as a
// download otherwise; then reports back.
export async function carryOut(i) {
  if (handled.has(i.id)) return;
  handled.add(i.id);
  let blob;
  try {
    blob = await bodyOf(i);
  } catch (e) {
    return report(i, "failed", "", e.message);
  }
  const r = await saveBlob(blob, i.suggested_name, i.mime_type);
  if (r.ok) { toast("Saved " + i.suggested_name); return report(i, "done", r.method); }
  if (r.cancelled) return report(i, "cancelled", r.method);
  if (r.needsGesture) {
    // The browser wants a click for its file picker: let the user click.
    handled.delete(i.id);
    toast("Click Save… to save " + i.suggested_name);
    return;
  }
  return report(i, "failed", r.method, r.error);
}

// saveBlob writes blob to the user's disk under name.
export async function saveBlob(blob, name, mime) {
  if (typeof window.showSaveFilePicker === "function") {
    try {
      const ext = (name.match(/\.[A-Za-z0-9]{1,8}$/) || [""])[0];
      const opts = { suggestedName: name };
      if (ext && mime) opts.types = [{ description: name, accept: { [mime.split(";")[0]]: [ext] } }];
      const handle = await window.showSaveFilePicker(opts);
      const w = await handle.createWritable();
      await w.write(blob);
      await w.close();
      return { ok: true, method: "file_system_access" };
    } catch (e) {
      if (e.name === "AbortError") return { cancelled: true, method: "file_system_access" };
      if (e.name === "SecurityError" || e.name === "NotAllowedError") return { needsGesture: true };
      if (e.name !== "TypeError") return { error: e.message, method: "file_system_access" };
      // A picker that rejects the options: fall back to a download.
    }
  }
  downloadBlob(blob, name);
  return { ok: true, method: "download" };
}

export function downloadBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = el("a", { href: url, download: name.split("/").pop() });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

export { formatTime };
