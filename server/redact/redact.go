// Package redact removes server paths from messages that leave the
// server (HTTP error bodies, MCP error results, run results): a caller
// learns what failed, never where the server keeps its files.
package redact

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Redactor removes server paths (the data directory, the temp directory,
// the working directory) from messages that leave the server: a caller
// learns what failed, never where the server keeps its files.
type Redactor struct{ re *regexp.Regexp }

// New returns a Redactor of dirs and of what they resolve to.
func New(dirs ...string) *Redactor {
	seen := map[string]bool{}
	var alts []string
	add := func(d string) {
		d = strings.TrimRight(filepath.Clean(d), "/")
		if d == "" || d == "." || d == "/" || seen[d] {
			return
		}
		seen[d] = true
		alts = append(alts, regexp.QuoteMeta(d))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			add(abs)
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				add(real)
			}
		}
		add(d)
	}
	if len(alts) == 0 {
		return &Redactor{}
	}
	// Longest first, so that a directory inside another is matched whole.
	for i := range alts {
		for j := i + 1; j < len(alts); j++ {
			if len(alts[j]) > len(alts[i]) {
				alts[i], alts[j] = alts[j], alts[i]
			}
		}
	}
	// A path starts a message or follows a space, a quote, a bracket or a
	// separator; "/tmp" inside a URL ("http://host/tmp/x") is not one.
	return &Redactor{re: regexp.MustCompile(`(^|[\s"'(\[=:,])(?:` + strings.Join(alts, "|") + `)(/[^\s"'(),;:]*|$|[\s"'(),;:.])`)}
}

// Message returns msg without server paths.
func (r *Redactor) Message(msg string) string {
	if r == nil || r.re == nil {
		return msg
	}
	return r.re.ReplaceAllStringFunc(msg, func(m string) string {
		sub := r.re.FindStringSubmatch(m)
		end := sub[2]
		if strings.HasPrefix(end, "/") {
			end = ""
		}
		return sub[1] + "[server path]" + end
	})
}

// ForDataDir redacts the data directory, the temp directory and the
// working directory.
func ForDataDir(dataDir string) *Redactor {
	wd, _ := os.Getwd()
	return New(dataDir, os.TempDir(), wd)
}
