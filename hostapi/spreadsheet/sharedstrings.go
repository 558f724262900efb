package spreadsheet

import (
	"io"
	"strconv"
	"strings"
)

// sharedStrings reads a workbook's shared string table lazily: strings are
// stored in order of first use, so the first rows of a sheet need only the
// start of the table. get parses just far enough to answer.
type sharedStrings struct {
	wb    *workbook
	rc    io.ReadCloser
	sc    *xmlScanner
	items []string
	done  bool
	err   error
	buf   []byte
}

func newSharedStrings(wb *workbook) *sharedStrings {
	ss := &sharedStrings{wb: wb}
	if wb.sstPath == "" || wb.entry(wb.sstPath) == nil {
		ss.done = true
	}
	return ss
}

// get returns string i; ok is false when the table has no such index.
func (ss *sharedStrings) get(i int) (string, bool, error) {
	for i >= len(ss.items) && !ss.done {
		if err := ss.more(); err != nil {
			return "", false, err
		}
	}
	if i < 0 || i >= len(ss.items) {
		return "", false, ss.err
	}
	return ss.items[i], true, nil
}

// more parses the next <si> item, or marks the table done.
func (ss *sharedStrings) more() error {
	if ss.err != nil {
		return ss.err
	}
	if ss.sc == nil {
		rc, err := ss.wb.open(ss.wb.sstPath, maxSharedString)
		if err != nil {
			ss.err = err
			return err
		}
		ss.rc = rc
		ss.sc = newXMLScanner(rc, 64<<20)
	}
	inSI, inT, rph := false, false, 0
	ss.buf = ss.buf[:0]
	for {
		k, err := ss.sc.next()
		if err != nil {
			ss.err = readFailed(err, "the shared strings table is malformed")
			ss.close()
			return ss.err
		}
		switch k {
		case tokEOF:
			ss.done = true
			ss.close()
			return nil
		case tokStart:
			switch string(ss.sc.name) {
			case "si":
				if ss.sc.empty {
					ss.items = append(ss.items, "")
					return nil
				}
				inSI, ss.buf = true, ss.buf[:0]
			case "rPh":
				if inSI && !ss.sc.empty {
					rph++
				}
			case "t":
				inT = inSI && !ss.sc.empty
			}
		case tokEnd:
			switch string(ss.sc.name) {
			case "t":
				inT = false
			case "rPh":
				if rph > 0 {
					rph--
				}
			case "si":
				if inSI {
					ss.items = append(ss.items, decodeEscapes(string(ss.buf)))
					return nil
				}
			case "sst":
				ss.done = true
				ss.close()
				return nil
			}
		case tokText:
			if inT && rph == 0 {
				ss.buf = appendText(ss.buf, ss.sc.text, ss.sc.cdata)
			}
		}
	}
}

func (ss *sharedStrings) close() {
	if ss.rc != nil {
		ss.rc.Close()
		ss.rc, ss.sc = nil, nil
	}
}

// decodeEscapes undoes the _xHHHH_ escapes Excel uses for characters XML
// cannot carry (control characters); _x005F_ escapes a literal underscore.
func decodeEscapes(s string) string {
	if !strings.Contains(s, "_x") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if i+7 <= len(s) && s[i] == '_' && s[i+1] == 'x' && s[i+6] == '_' {
			if n, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
				if n == 0x5F {
					b.WriteByte('_')
				} else {
					b.WriteRune(rune(n))
				}
				i += 7
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}
