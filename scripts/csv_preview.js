// @tool csv_preview
// @description Show the header and the first rows of a CSV/TSV text file as a Markdown table, with the file's total line count. Works on any delimited text file without loading it whole.
// @input {"type":"object","properties":{"id":{"type":"string","description":"File id or workspace path of the CSV"},"rows":{"type":"integer","minimum":1,"maximum":200,"description":"Data rows to show (default 10)"}},"required":["id"]}
const rows = input.rows || 10;
const { content, totalLines } = await files.readText(input.id, { startLine: 1, endLine: rows + 1 });
const lines = content.split(/\r?\n/).filter((l) => l.length > 0);
if (lines.length === 0) return { markdown: "(empty file)", totalLines };
const delimiter = [",", "\t", ";", "|"].map((d) => [d, lines[0].split(d).length]).sort((a, b) => b[1] - a[1])[0][0];
// A small RFC 4180 splitter: quoted fields may hold the delimiter and "" escapes.
const split = (line) => {
  const out = [];
  let cur = "", quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') { cur += '"'; i++; }
      else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === delimiter) { out.push(cur); cur = ""; }
    else cur += c;
  }
  out.push(cur);
  return out;
};
const table = lines.map(split);
const esc = (s) => s.replace(/\|/g, "\\|");
const md = [
  "| " + table[0].map(esc).join(" | ") + " |",
  "|" + table[0].map(() => " --- |").join(""),
  ...table.slice(1).map((r) => "| " + r.map(esc).join(" | ") + " |"),
].join("\n");
return { markdown: md, delimiter, totalLines, shownRows: table.length - 1 };
