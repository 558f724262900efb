package store

import (
	"path"
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// sniffLen is how much of a body MIME detection looks at.
const sniffLen = 3072

func init() { mimetype.SetLimit(sniffLen) }

// textByExt refines text bodies whose format has no magic bytes.
var textByExt = map[string]string{
	".csv": "text/csv", ".tsv": "text/tab-separated-values", ".tab": "text/tab-separated-values",
	".psv": "text/plain", ".txt": "text/plain", ".log": "text/plain",
	".md": "text/markdown", ".markdown": "text/markdown",
	".json": "application/json", ".jsonl": "application/x-ndjson", ".ndjson": "application/x-ndjson",
	".js": "text/javascript", ".mjs": "text/javascript", ".ts": "text/typescript",
	".py": "text/x-python", ".go": "text/x-go", ".rs": "text/x-rust", ".java": "text/x-java",
	".c": "text/x-c", ".h": "text/x-c", ".cpp": "text/x-c++", ".sh": "text/x-shellscript",
	".sql": "application/sql", ".yaml": "application/yaml", ".yml": "application/yaml",
	".toml": "application/toml", ".xml": "application/xml", ".html": "text/html", ".htm": "text/html",
	".css": "text/css", ".svg": "image/svg+xml", ".ini": "text/plain", ".cfg": "text/plain",
}

// zipByExt refines zip containers mimetype could not see into within sniffLen.
var zipByExt = map[string]string{
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}

// DetectMIME names the type of a body from its first bytes, refining formats
// that have no magic by the name's extension, but only when the bytes look
// like text (a PNG called notes.csv stays image/png).
func DetectMIME(head []byte, name string) string {
	ext := strings.ToLower(path.Ext(name))
	m := mimetype.Detect(head)
	base := m.String()
	if i := strings.IndexByte(base, ';'); i >= 0 {
		base = base[:i]
	}
	if len(head) == 0 {
		if t, ok := textByExt[ext]; ok {
			return t
		}
		return "application/octet-stream"
	}
	if t, ok := zipByExt[ext]; ok && base == "application/zip" {
		return t
	}
	if looksText(m, head) {
		if t, ok := textByExt[ext]; ok {
			return t
		}
	}
	return base
}

func looksText(m *mimetype.MIME, _ []byte) bool {
	for p := m; p != nil; p = p.Parent() {
		if p.Is("text/plain") {
			return true
		}
	}
	return false
}
