package download

import (
	"mime"
	"net/url"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// fallbackFilename is used when neither the server nor the URL names the file.
const fallbackFilename = "download"

// maxFilenameBytes is the common file-system limit on one name component.
const maxFilenameBytes = 255

// pickFilename chooses the name the download is stored under: the server's
// Content-Disposition first (it knows best), then the last segment of the
// final URL's path, then a fixed fallback. Every candidate is sanitized and
// an unusable one falls through to the next.
func pickFilename(contentDisposition string, final *url.URL) string {
	if contentDisposition != "" {
		// ParseMediaType also decodes RFC 2231 filename*=UTF-8''... into
		// "filename", preferring it over the plain parameter.
		if _, params, err := mime.ParseMediaType(contentDisposition); err == nil {
			if n := sanitizeFilename(params["filename"]); n != "" {
				return n
			}
		}
	}
	if final != nil {
		// u.Path is already percent-decoded; a trailing "/" leaves an empty
		// last segment, which correctly falls through to the fallback.
		p := final.Path
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			p = p[i+1:]
		}
		if n := sanitizeFilename(p); n != "" {
			return n
		}
	}
	return fallbackFilename
}

// sanitizeFilename makes a server- or URL-supplied name safe to use as a
// single path component: a hostile server may send "../../etc/passwd",
// Windows separators, control characters or a name longer than any file
// system accepts. It returns "" when nothing usable is left.
func sanitizeFilename(name string) string {
	// Keep only the last component: "a/b.txt" most likely means "b.txt",
	// and dropping the directory part also defuses traversal.
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ToValidUTF8(name, "_")
	name = strings.Map(func(r rune) rune {
		// Control characters break terminals and logs; format characters
		// (bidi overrides, zero-width joiners) let "txt.exe" display as
		// "exe.txt".
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == ".." {
		return ""
	}
	return truncateFilename(name, maxFilenameBytes)
}

// truncateFilename shortens name to at most n bytes without splitting a
// UTF-8 sequence, keeping a short extension so the file type survives.
func truncateFilename(name string, n int) string {
	if len(name) <= n {
		return name
	}
	ext := path.Ext(name)
	if len(ext) > 16 || len(ext) >= n {
		ext = ""
	}
	return truncateUTF8(strings.TrimSuffix(name, ext), n-len(ext)) + ext
}

// truncateUTF8 cuts s to at most n bytes at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
