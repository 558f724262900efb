// @tool workspace_overview
// @description Summarise the workspace: how many files of each kind, total bytes, and the largest and newest files. A good first call in an unfamiliar workspace.
// @input {"type":"object","properties":{"pattern":{"type":"string","description":"Optional glob to narrow the files, e.g. \"reports/**\""},"top":{"type":"integer","minimum":1,"maximum":50,"description":"How many largest/newest files to list (default 5)"}}}
const list = await files.list(input.pattern || undefined);
const top = input.top || 5;
const byKind = {};
let totalBytes = 0;
for (const f of list) {
  const kind = f.mimeType.split("/")[0] === "image" ? "image" : (f.name.split(".").pop() || "file").toLowerCase();
  byKind[kind] = (byKind[kind] || 0) + 1;
  totalBytes += f.size;
}
const brief = (f) => ({ name: f.name, size: f.size, modifiedOn: f.modifiedOn });
return {
  files: list.length,
  totalBytes,
  byKind,
  largest: [...list].sort((a, b) => b.size - a.size).slice(0, top).map(brief),
  newest: [...list].sort((a, b) => (a.modifiedOn < b.modifiedOn ? 1 : -1)).slice(0, top).map(brief),
};
