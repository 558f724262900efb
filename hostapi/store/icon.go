package store

import (
	"path"
	"strings"
)

// IconType is the short kind a UI shows an icon for (seed 002): md, pdf,
// code, image, csv, xlsx, docx, json, text, archive, audio, video or file.
func (f File) IconType() string {
	ext := strings.TrimPrefix(strings.ToLower(path.Ext(f.Name)), ".")
	switch ext {
	case "md", "markdown":
		return "md"
	case "pdf":
		return "pdf"
	case "csv", "tsv", "psv":
		return "csv"
	case "xlsx", "xls", "xlsm", "ods":
		return "xlsx"
	case "docx", "doc", "odt", "rtf":
		return "docx"
	case "json", "jsonl", "ndjson":
		return "json"
	case "js", "mjs", "ts", "py", "go", "rs", "java", "c", "h", "cpp", "sh", "sql", "html", "css", "yaml", "yml", "toml", "xml", "wasm":
		return "code"
	case "txt", "log":
		return "text"
	case "zip", "gz", "tgz", "tar", "7z", "bz2", "xz":
		return "archive"
	}
	switch m := f.MimeType; {
	case strings.HasPrefix(m, "image/"):
		return "image"
	case strings.HasPrefix(m, "audio/"):
		return "audio"
	case strings.HasPrefix(m, "video/"):
		return "video"
	case m == "application/pdf":
		return "pdf"
	case strings.HasPrefix(m, "text/"):
		return "text"
	}
	return "file"
}
