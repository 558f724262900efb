// The script console: code, JSON input and a timeout go to POST /api/run;
// the run result (SPEC 5) comes back with its logs, result or coded error
// with stack, and the files the run touched. Instructions for the client in
// the result (seed 004) are carried out through the feed.
import { api, headers, ApiError } from "./api.js";
import { $, el, toast } from "./ui.js";
import { maybeCarryOut } from "./feed.js";

let hooks = { openFile: () => {} };
export function setConsoleHooks(h) { hooks = Object.assign(hooks, h); }

export function setupConsole() {
  const code = $("code");
  code.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); return; }
    if (e.key === "Tab" && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey) {
      // Indent inside the editor; Escape then Tab leaves it (see below).
      if (code.dataset.escaped === "1") { code.dataset.escaped = ""; return; }
      e.preventDefault();
      const s = code.selectionStart, t = code.selectionEnd;
      code.setRangeText("  ", s, t, "end");
    }
    if (e.key === "Escape") code.dataset.escaped = "1";
  });
  code.addEventListener("blur", () => (code.dataset.escaped = ""));
  $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
  // The page binds Run itself (this module loads on first use).
}

// run sends the console's script to POST /api/run and shows the result.
export async function run() {
  const out = $("run-output");
  const btn = $("run-btn");
  let input;
  const inputText = $("input").value.trim();
  try {
    input = inputText ? JSON.parse(inputText) : undefined;
  } catch (e) {
    out.replaceChildren(el("div", { class: "error-box", role: "alert" }, el("strong", {}, "VALIDATION_FAILED"), " input is not JSON: " + e.message));
    return;
  }
  const timeout = Math.max(1, Math.min(600, parseInt($("timeout").value, 10) || 30));
  btn.disabled = true;
  btn.textContent = "Running…";
  out.replaceChildren(el("div", { class: "loading" }, "Running…"));
  try {
    const res = await fetch("/api/run", { method: "POST", headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ code: $("code").value, input, timeout_ms: timeout * 1000 }) });
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      const e = body && body.error ? body.error : { code: "HTTP_" + res.status, message: res.statusText };
      throw new ApiError(e.code, e.message, res.status);
    }
    show(out, body);
    const runId = res.headers.get("X-Run-Id");
    if (runId && body.ok) {
      // The run's instructions for this page (also streamed by the feed).
      const msg = await api("/api/runs/" + encodeURIComponent(runId)).catch(() => null);
      for (const i of (msg && msg.instructions) || []) maybeCarryOut(i);
    }
  } catch (e) {
    out.replaceChildren(el("div", { class: "error-box", role: "alert" }, el("strong", {}, e.code || "ERROR"), " ", e.message));
  } finally {
    btn.disabled = false;
    btn.textContent = "Run";
  }
}

function show(out, r) {
  const parts = [];
  parts.push(el("div", { class: "run-status " + (r.ok ? "ok" : "error"), id: "run-status" },
    r.ok ? "ok" : "failed", ` · ${r.durationMs} ms`));
  if (r.logs && r.logs.length) {
    parts.push(el("h4", {}, "Logs"), el("ol", { class: "logs", id: "run-logs" }, r.logs.map((l) =>
      el("li", { class: "log " + l.level }, el("span", { class: "level" }, l.level), " ", l.message))));
  }
  if (r.ok) {
    parts.push(el("h4", {}, "Result"), el("pre", { class: "result", id: "run-result" }, JSON.stringify(r.result, null, 2) ?? "undefined"));
  } else if (r.error) {
    parts.push(el("div", { class: "error-box", role: "alert", id: "run-error" }, el("strong", {}, r.error.code), " ", r.error.message));
    if (r.error.stack) parts.push(el("pre", { class: "stack", id: "run-stack" }, r.error.stack));
  }
  if (r.files && r.files.length) {
    parts.push(el("h4", {}, "Files"), el("ul", { class: "artifacts", id: "run-files" }, r.files.map((f) =>
      el("li", { class: "artifact " + f.action },
        el("span", { class: "badge " + f.iconType }, f.iconType), " ",
        f.action === "deleted" ? el("span", { class: "gone" }, f.name) :
          el("button", { type: "button", class: "link", onclick: () => hooks.openFile(f.id) }, f.name),
        el("span", { class: "action" }, f.action)))));
  }
  out.replaceChildren(...parts);
  if (!r.ok) toast("The script failed: " + (r.error ? r.error.code : "error"), true);
}
