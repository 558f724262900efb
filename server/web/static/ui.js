// Small DOM helpers shared by the page's modules.

export const $ = (id) => document.getElementById(id);

// el builds an element: el("button", {class: "x", onclick: fn}, "text", child…).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (v === true) e.setAttribute(k, "");
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function toast(msg, isErr) {
  const t = $("toast");
  t.textContent = msg;
  t.className = "toast" + (isErr ? " err" : "");
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), isErr ? 6000 : 2500);
}

export function human(n) {
  if (n === undefined || n === null) return "";
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + " GB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KB";
  return n + " B";
}

// grouped writes 1234567 as 1,234,567. (Not toLocaleString: the first
// use of Intl in a tab loads its locale data, 50–150 ms here, before the
// list could be drawn.)
export const grouped = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");

export const plural = (n, word) => `${grouped(n)} ${word}${n === 1 ? "" : "s"}`;

// kindOf is how a file is shown: md, pdf, csv, xlsx, image, json, text,
// code, docx, archive or file (seed 002's icon types, from the server's
// icon_type when there is one).
export function kindOf(f) {
  const name = f.name || "";
  const ext = (name.includes(".") ? name.split(".").pop() : "").toLowerCase();
  const byExt = { md: "md", markdown: "md", pdf: "pdf", csv: "csv", tsv: "csv", psv: "csv", xlsx: "xlsx", xlsm: "xlsx", docx: "docx",
    json: "json", ndjson: "text", js: "code", mjs: "code", ts: "code", py: "code", go: "code", rs: "code", java: "code", c: "code",
    h: "code", sh: "code", sql: "code", html: "code", css: "code", xml: "code", yaml: "code", yml: "code", toml: "code",
    txt: "text", log: "text", zip: "archive", png: "image", jpg: "image", jpeg: "image", gif: "image", webp: "image", tif: "image", tiff: "image" };
  if (byExt[ext]) return byExt[ext];
  const m = f.mime_type || "";
  if (m.startsWith("image/")) return "image";
  if (m === "application/pdf") return "pdf";
  if (m.includes("json")) return "json";
  if (m.startsWith("text/")) return "text";
  return f.icon_type && f.icon_type !== "file" ? f.icon_type : "file";
}

// ask shows a modal question and resolves with the value of the button
// chosen ("cancel" for Escape). choices: [{value, label, primary?, danger?}].
// With opts it resolves {value, all}; opts.all also offers "do this for
// the other files too".
export function ask(title, text, choices, opts) {
  const hasOpts = !!opts;
  opts = opts || {};
  const d = $("ask");
  $("ask-title").textContent = title;
  $("ask-text").textContent = text;
  $("ask-all-label").hidden = !opts.all;
  $("ask-all").checked = false;
  const menu = $("ask-buttons");
  menu.replaceChildren(...choices.map((c) => el("button", { value: c.value, class: c.primary ? "primary" : c.danger ? "danger" : "ghost", type: "submit",
    "data-choice": c.value }, c.label)));
  return new Promise((resolve) => {
    d.addEventListener("close", () => {
      const value = d.returnValue || "cancel";
      resolve(hasOpts ? { value, all: !!opts.all && $("ask-all").checked } : value);
    }, { once: true });
    d.returnValue = "";
    d.showModal();
    const focus = menu.querySelector(".primary") || menu.querySelector("button");
    if (focus) focus.focus();
  });
}

// formatTime shows an ISO time as the user's local date and time,
// 2024-05-01 14:03: unambiguous in every locale, and without Intl (see
// grouped).
const pad = (n) => (n < 10 ? "0" + n : "" + n);
export function formatTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (isNaN(d)) return "";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
