// @tool tour_demo
// @description A short tour of the sandbox API: creates a small CSV in the workspace if it is missing, reads lines of it, searches it and returns what it found. `make run` runs it.
// @input {"type":"object","properties":{}}
const name = "tour/fruit.csv";
const existing = await files.list("tour/*");
if (!existing.some((f) => f.name === name)) {
  await files.create(name, { content: "fruit,qty,price\napple,3,0.5\npear,5,0.75\nplum,7,0.25\n" });
  console.log("created", name);
}
const info = await files.info(name);
const [head, count, hits] = await Promise.all([
  files.readText(name, { startLine: 1, endLine: 2 }),
  files.lineCount(name),
  files.searchText(name, "^p"),
]);
const rows = (await files.readText(name, { startLine: 2 })).content.trim().split("\n").map((l) => l.split(","));
const total = rows.reduce((sum, [, qty, price]) => sum + Number(qty) * Number(price), 0);
return { file: { id: info.id, mimeType: info.mimeType, size: info.size }, head: head.content, lines: count, startsWithP: hits.matches, total };
