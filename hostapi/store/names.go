package store

import (
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/text/unicode/norm"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// CleanName validates a user-given workspace path and returns its canonical
// form ("reports/q3.xlsx"). A leading "/" is allowed and ignored. Names are
// normalised to Unicode NFC, so "café.txt" typed on macOS (NFD) and on Linux
// (NFC) is one file. Names never reach the filesystem (bodies use generated
// names), but they are still kept tidy so that every door shows the same name
// for the same file, and characters that make a name display as something it
// is not (bidirectional controls, zero-width characters) are refused.
func CleanName(name string) (string, error) {
	n := strings.TrimSpace(name)
	n = strings.TrimLeft(n, "/")
	if n == "" {
		return "", apierr.New(apierr.ValidationFailed, "file name is empty; give a name such as \"reports/q3.xlsx\"")
	}
	if !utf8.ValidString(n) {
		return "", apierr.New(apierr.ValidationFailed, "file name %q is not valid UTF-8", name)
	}
	n = norm.NFC.String(n)
	if len(n) > 1024 {
		return "", apierr.New(apierr.ValidationFailed, "file name is %d bytes long; the limit is 1024", len(n))
	}
	pos := 0
	for _, r := range n {
		pos++
		if what := deceptiveRune(r); what != "" {
			return "", apierr.New(apierr.ValidationFailed,
				"file name %q contains U+%04X (%s) at character %d; bidirectional-control and zero-width characters are not allowed in names because they make a name display as something else — remove it",
				name, r, what, pos)
		}
		if unicode.IsControl(r) || r == '\\' {
			return "", apierr.New(apierr.ValidationFailed, "file name %q contains a control character or backslash; use plain characters and \"/\" between folders", name)
		}
	}
	for _, seg := range strings.Split(n, "/") {
		switch {
		case seg == "":
			return "", apierr.New(apierr.ValidationFailed, "file name %q has an empty folder segment (\"//\" or a trailing \"/\")", name)
		case seg == "." || seg == "..":
			return "", apierr.New(apierr.ValidationFailed, "file name %q may not contain \".\" or \"..\" segments", name)
		case len(seg) > 255:
			return "", apierr.New(apierr.ValidationFailed, "a segment of file name %q is longer than 255 bytes", name)
		}
	}
	return n, nil
}

// deceptiveRune names r when it is a bidirectional-control or zero-width
// character (the "Trojan Source" set), "" otherwise.
func deceptiveRune(r rune) string {
	switch r {
	case 0x061C:
		return "ARABIC LETTER MARK"
	case 0x200B:
		return "ZERO WIDTH SPACE"
	case 0x200C:
		return "ZERO WIDTH NON-JOINER"
	case 0x200D:
		return "ZERO WIDTH JOINER"
	case 0x200E:
		return "LEFT-TO-RIGHT MARK"
	case 0x200F:
		return "RIGHT-TO-LEFT MARK"
	case 0x202A:
		return "LEFT-TO-RIGHT EMBEDDING"
	case 0x202B:
		return "RIGHT-TO-LEFT EMBEDDING"
	case 0x202C:
		return "POP DIRECTIONAL FORMATTING"
	case 0x202D:
		return "LEFT-TO-RIGHT OVERRIDE"
	case 0x202E:
		return "RIGHT-TO-LEFT OVERRIDE"
	case 0x2060:
		return "WORD JOINER"
	case 0x2066:
		return "LEFT-TO-RIGHT ISOLATE"
	case 0x2067:
		return "RIGHT-TO-LEFT ISOLATE"
	case 0x2068:
		return "FIRST STRONG ISOLATE"
	case 0x2069:
		return "POP DIRECTIONAL ISOLATE"
	case 0xFEFF:
		return "ZERO WIDTH NO-BREAK SPACE"
	}
	return ""
}

// lookupName is the form of a file reference that names are stored in: no
// leading "/", NFC. It does not validate (a lookup of an invalid name simply
// finds nothing).
func lookupName(ref string) string {
	n := strings.TrimLeft(ref, "/")
	if !norm.NFC.IsNormalString(n) {
		n = norm.NFC.String(n)
	}
	return n
}

// IsID reports whether ref has the shape of a file id (a UUID).
func IsID(ref string) bool {
	if len(ref) != 36 {
		return false
	}
	_, err := uuid.Parse(ref)
	return err == nil
}

// Glob is a compiled file-name pattern. "*" and "?" stay within one folder,
// "**" crosses folders, "[abc]" is a class, "{a,b}" alternatives. A pattern
// without "/" is matched against the base name, so "*.csv" finds CSV files in
// every folder, which is what an agent asking for "*.csv" means.
type Glob struct {
	re       *regexp.Regexp
	baseOnly bool
}

// CompileGlob compiles pattern; an empty pattern matches everything.
func CompileGlob(pattern string) (*Glob, error) {
	p := lookupName(strings.TrimSpace(pattern))
	if p == "" {
		return &Glob{}, nil
	}
	var b strings.Builder
	b.WriteString("^")
	depth := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '*':
			if i+1 < len(p) && p[i+1] == '*' {
				i++
				if i+1 < len(p) && p[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, apierr.New(apierr.ValidationFailed, "pattern %q has an unclosed \"[\"", pattern)
			}
			class := p[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				b.WriteString(`\}`)
				continue
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth > 0 {
				b.WriteString("|")
			} else {
				b.WriteString(",")
			}
		default:
			// Byte by byte: a multi-byte UTF-8 character is copied whole
			// over its bytes (string(c) would re-encode each byte as a
			// Latin-1 rune).
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	if depth != 0 {
		return nil, apierr.New(apierr.ValidationFailed, "pattern %q has an unclosed \"{\"", pattern)
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "pattern %q is not a valid glob: %v", pattern, err)
	}
	return &Glob{re: re, baseOnly: !strings.Contains(p, "/")}, nil
}

// MatchesAll reports whether the pattern matches every name (it is empty).
func (g *Glob) MatchesAll() bool { return g.re == nil }

// Match reports whether name matches.
func (g *Glob) Match(name string) bool {
	if g.re == nil {
		return true
	}
	if g.baseOnly {
		return g.re.MatchString(path.Base(name))
	}
	return g.re.MatchString(name)
}
