package spreadsheet

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// xmlScanner is a small pull tokenizer for the SpreadsheetML subset that
// sheet and shared-string parts use. encoding/xml allocates for every token
// and runs at ~20 MB/s; a 100k-row sheet is ~40 MB of XML, so the read path
// uses this instead and stops as soon as the rows it needs are done.
//
// It reports start tags (local name plus raw attribute bytes), end tags and
// text; comments, processing instructions and DOCTYPE are skipped, CDATA is
// text. Entities are left to the caller (appendText, attrValue). Slices it
// returns point into its buffer and are valid until the next call to next.
type xmlScanner struct {
	r      io.Reader
	buf    []byte
	pos    int
	end    int
	eof    bool
	maxBuf int

	kind  tokKind
	name  []byte // local name
	qname []byte // name as written, with its prefix
	attrs []byte
	empty bool // the start tag closed itself (<c/>); no end token follows
	text  []byte
	cdata bool
	raw   []byte // the token's bytes as they appear in the input

	// keepAll makes next report comments, processing instructions and
	// DOCTYPE as tokOther instead of skipping them (for rewriting).
	keepAll bool
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokStart
	tokEnd
	tokText
	tokOther // comment, PI or DOCTYPE (only with keepAll)
)

var (
	errXMLTruncated = errors.New("the XML ends in the middle of a tag (truncated file)")
	errXMLToken     = errors.New("an XML token is larger than the parser's limit")
)

func newXMLScanner(r io.Reader, maxToken int) *xmlScanner {
	return &xmlScanner{r: r, buf: make([]byte, 64<<10), maxBuf: maxToken}
}

// fill moves the unread bytes to the front of the buffer, grows it when the
// unread part already fills it, and reads until it is full or the input ends.
func (s *xmlScanner) fill() error {
	if s.eof {
		return io.EOF
	}
	if s.pos > 0 {
		copy(s.buf, s.buf[s.pos:s.end])
		s.end -= s.pos
		s.pos = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf)*2 > s.maxBuf {
			return errXMLToken
		}
		nb := make([]byte, len(s.buf)*2)
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	for s.end < len(s.buf) {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF {
			s.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrNoProgress
		}
	}
	return nil
}

// next advances to the next token. It returns tokEOF at the end of input.
func (s *xmlScanner) next() (tokKind, error) {
	for {
		start := s.pos
		k, ok, err := s.parse()
		if err != nil {
			return tokEOF, err
		}
		if ok {
			s.raw = s.buf[start:s.pos]
			if k == tokEOF {
				if s.keepAll {
					s.kind = tokOther
					return tokOther, nil
				}
				continue // a skipped comment or PI; look again
			}
			s.kind = k
			return k, nil
		}
		if s.eof {
			if s.pos >= s.end {
				s.kind = tokEOF
				return tokEOF, nil
			}
			return tokEOF, errXMLTruncated
		}
		if err := s.fill(); err != nil && err != io.EOF {
			return tokEOF, err
		}
	}
}

// nextIn advances to the next token inside element name, whose start tag
// has been read: ok is false on name's end tag, and input that ends first
// is errXMLTruncated.
func (s *xmlScanner) nextIn(name string) (k tokKind, ok bool, err error) {
	k, err = s.next()
	switch {
	case err != nil:
		return k, false, err
	case k == tokEOF:
		return k, false, errXMLTruncated
	}
	return k, k != tokEnd || string(s.name) != name, nil
}

var (
	pfxComment = []byte("<!--")
	pfxCDATA   = []byte("<![CDATA[")
	sfxComment = []byte("-->")
	sfxCDATA   = []byte("]]>")
	sfxPI      = []byte("?>")
)

// parse tries to read one token from the buffered bytes. ok=false means more
// input is needed; ok with tokEOF means something was skipped.
func (s *xmlScanner) parse() (tokKind, bool, error) {
	b := s.buf[s.pos:s.end]
	if len(b) == 0 {
		return tokEOF, false, nil
	}
	if b[0] != '<' {
		i := bytes.IndexByte(b, '<')
		if i < 0 {
			if !s.eof {
				return tokEOF, false, nil
			}
			i = len(b)
		}
		s.text, s.cdata = b[:i], false
		s.pos += i
		return tokText, true, nil
	}
	if len(b) < 2 {
		return tokEOF, false, nil
	}
	switch b[1] {
	case '/':
		i := bytes.IndexByte(b, '>')
		if i < 0 {
			return tokEOF, false, nil
		}
		s.qname = bytes.TrimSpace(b[2:i])
		s.name = localName(s.qname)
		s.pos += i + 1
		return tokEnd, true, nil
	case '?':
		i := bytes.Index(b, sfxPI)
		if i < 0 {
			return tokEOF, false, nil
		}
		s.pos += i + 2
		return tokEOF, true, nil
	case '!':
		if len(b) < len(pfxCDATA) && !s.eof {
			return tokEOF, false, nil
		}
		switch {
		case bytes.HasPrefix(b, pfxComment):
			i := bytes.Index(b[4:], sfxComment)
			if i < 0 {
				return tokEOF, false, nil
			}
			s.pos += 4 + i + 3
			return tokEOF, true, nil
		case bytes.HasPrefix(b, pfxCDATA):
			i := bytes.Index(b[9:], sfxCDATA)
			if i < 0 {
				return tokEOF, false, nil
			}
			s.text, s.cdata = b[9:9+i], true
			s.pos += 9 + i + 3
			return tokText, true, nil
		default: // <!DOCTYPE …> possibly with an internal subset […]
			i := bytes.IndexByte(b, '>')
			if j := bytes.IndexByte(b, '['); j >= 0 && (i < 0 || j < i) {
				k := bytes.Index(b[j:], []byte("]>"))
				if k < 0 {
					return tokEOF, false, nil
				}
				i = j + k + 1
			}
			if i < 0 {
				return tokEOF, false, nil
			}
			s.pos += i + 1
			return tokEOF, true, nil
		}
	}
	i := tagEnd(b)
	if i < 0 {
		return tokEOF, false, nil
	}
	tag := b[1:i]
	s.empty = len(tag) > 0 && tag[len(tag)-1] == '/'
	if s.empty {
		tag = tag[:len(tag)-1]
	}
	j := 0
	for j < len(tag) && !isSpace(tag[j]) {
		j++
	}
	s.qname, s.attrs = tag[:j], tag[j:]
	s.name = localName(s.qname)
	s.pos += i + 1
	return tokStart, true, nil
}

// tagEnd finds the '>' closing the start tag at b[0], skipping quoted
// attribute values (which may contain '>').
func tagEnd(b []byte) int {
	i := bytes.IndexByte(b, '>')
	if i < 0 {
		return -1
	}
	seg := b[:i]
	if bytes.IndexByte(seg, '\'') < 0 && bytes.Count(seg, []byte{'"'})%2 == 0 {
		return i
	}
	var q byte
	for k := 1; k < len(b); k++ {
		c := b[k]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '>':
			return k
		}
	}
	return -1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// localName drops a namespace prefix ("x:row" → "row").
func localName(n []byte) []byte {
	if i := bytes.LastIndexByte(n, ':'); i >= 0 {
		return n[i+1:]
	}
	return n
}

// attrValue finds attribute name (exact, unprefixed) in raw start-tag
// attribute bytes and returns its unescaped value.
func attrValue(attrs []byte, name string) ([]byte, bool) {
	for {
		for len(attrs) > 0 && isSpace(attrs[0]) {
			attrs = attrs[1:]
		}
		eq := bytes.IndexByte(attrs, '=')
		if eq < 0 {
			return nil, false
		}
		key := bytes.TrimSpace(attrs[:eq])
		rest := attrs[eq+1:]
		for len(rest) > 0 && isSpace(rest[0]) {
			rest = rest[1:]
		}
		if len(rest) == 0 || (rest[0] != '"' && rest[0] != '\'') {
			return nil, false
		}
		end := bytes.IndexByte(rest[1:], rest[0])
		if end < 0 {
			return nil, false
		}
		val := rest[1 : 1+end]
		if string(key) == name {
			if bytes.IndexByte(val, '&') >= 0 {
				return appendText(nil, val, false), true
			}
			return val, true
		}
		attrs = rest[2+end:]
	}
}

// appendText appends XML character data to dst, resolving the predefined and
// numeric entities and normalising line ends as an XML parser must. Unknown
// entities are kept literally (no DTD entity expansion, so no entity bombs).
func appendText(dst, src []byte, cdata bool) []byte {
	if bytes.IndexByte(src, '\r') < 0 && (cdata || bytes.IndexByte(src, '&') < 0) {
		return append(dst, src...)
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\r':
			dst = append(dst, '\n')
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
		case c == '&' && !cdata:
			semi := bytes.IndexByte(src[i:], ';')
			if semi < 0 || semi > 12 {
				dst = append(dst, c)
				continue
			}
			ent := src[i+1 : i+semi]
			if r, ok := entity(ent); ok {
				dst = utf8.AppendRune(dst, r)
				i += semi
				continue
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func entity(e []byte) (rune, bool) {
	switch string(e) {
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "amp":
		return '&', true
	case "quot":
		return '"', true
	case "apos":
		return '\'', true
	}
	if len(e) < 2 || e[0] != '#' {
		return 0, false
	}
	var n uint64
	var err error
	if e[1] == 'x' || e[1] == 'X' {
		n, err = strconv.ParseUint(string(e[2:]), 16, 32)
	} else {
		n, err = strconv.ParseUint(string(e[1:]), 10, 32)
	}
	if err != nil || n > utf8.MaxRune || !utf8.ValidRune(rune(n)) {
		return 0, false
	}
	return rune(n), true
}

// atoiBytes parses a non-negative decimal integer, ok=false on anything
// else or on overflow past limit.
func atoiBytes(b []byte, limit int) (int, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > limit {
			return 0, false
		}
	}
	return n, true
}
