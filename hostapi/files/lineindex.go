package files

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// checkpointEvery is how many lines lie between two remembered offsets. A
// read of lines N..M seeks to the checkpoint before N and scans at most this
// many lines to reach it, so a 1M-line file costs 32 KB of index.
const checkpointEvery = 256

var nl = []byte{'\n'}

// newline says how a line ends in a body's bytes. Every encoding the text
// tier reads writes "\n" as the single byte 0x0A, except UTF-16, where it
// is a two-byte code unit (0A 00 little-endian, 00 0A big-endian) that
// starts at an even distance from the start of the text: a 0x0A byte
// elsewhere is half of another character (U+0A0D, U+010A, …).
type newline struct {
	unit int // bytes per code unit: 1, or 2 for UTF-16
	at   int // where 0x0A sits inside the unit: 0, or 1 for UTF-16BE
}

func newlineOf(enc textenc.Encoding) newline {
	switch enc.Name {
	case "utf-16le":
		return newline{unit: 2, at: 0}
	case "utf-16be":
		return newline{unit: 2, at: 1}
	}
	return newline{unit: 1}
}

// next returns the offset just past the first newline in b at or after
// pos, or -1. For UTF-16, b must start at a code-unit boundary; a trailing
// odd byte is never part of a newline.
func (n newline) next(b []byte, pos int) int {
	if n.unit == 1 {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return -1
		}
		return pos + i + 1
	}
	b = b[:len(b)&^1]
	for pos < len(b) {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return -1
		}
		p := pos + i
		start := p - n.at
		if start%2 == 0 && b[start+1-n.at] == 0 {
			return start + 2
		}
		pos = p + 1
	}
	return -1
}

// lineIndex describes one body (identified by its sha256): its text
// encoding, where every checkpointEvery-th line starts, how many lines it
// has and whether the last line ends with a newline. Offsets are byte
// offsets in the body; line 1 starts after a byte order mark.
type lineIndex struct {
	enc         textenc.Encoding
	nl          newline
	textStart   int64 // the length of the byte order mark
	size        int64
	totalLines  int
	checkpoints []int64 // checkpoints[k] = offset of line k*every+1
	every       int
	endsWithNL  bool
	// binary is set when the bytes are not text in any encoding (NUL
	// bytes, control characters); the index then reads them as UTF-8.
	binary bool
	// validUTF8 is set when the build checked the text is UTF-8 throughout.
	validUTF8 bool
}

// buildLineIndex scans the body r (from its first byte) once, as text in
// enc. Lines are separated by newlines; a final newline does not start
// another line ("a\nb\n" has 2 lines, "" has 0).
func buildLineIndex(r io.Reader, enc textenc.Encoding) (*lineIndex, error) {
	return buildIndex(r, enc, checkpointEvery, false)
}

// buildIndex is buildLineIndex with a checkpoint every so many lines and,
// with checkUTF8, a check of whether the text is UTF-8 throughout
// (validUTF8).
func buildIndex(r io.Reader, enc textenc.Encoding, every int, checkUTF8 bool) (*lineIndex, error) {
	idx := &lineIndex{enc: enc, nl: newlineOf(enc), every: every}
	bom := enc.BOMBytes()
	if len(bom) > 0 {
		head := make([]byte, len(bom))
		n, err := io.ReadFull(r, head)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, readFailed(err)
		}
		if !bytes.Equal(head[:n], bom) {
			// Only a body that starts with the mark is read past it.
			r = io.MultiReader(bytes.NewReader(head[:n]), r)
		} else {
			idx.textStart = int64(n)
		}
	}
	idx.checkpoints = []int64{idx.textStart}
	var err error
	if idx.nl.unit == 1 {
		var check *utf8Check
		if checkUTF8 {
			check = &utf8Check{valid: true}
		}
		err = idx.scanBytes(r, check)
		idx.validUTF8 = check != nil && check.end()
	} else {
		err = idx.scanUnits(r)
	}
	if err != nil {
		return nil, err
	}
	// A checkpoint at the very end (after a final newline) starts no line.
	if k := len(idx.checkpoints) - 1; k > 0 && idx.checkpoints[k] >= idx.size {
		idx.checkpoints = idx.checkpoints[:k]
	}
	return idx, nil
}

// scanBytes indexes text whose newline is the byte 0x0A, feeding check
// (when not nil) every byte.
func (idx *lineIndex) scanBytes(r io.Reader, check *utf8Check) error {
	buf := make([]byte, 1<<20)
	off := idx.textStart
	lines := 0 // newlines seen so far
	var last byte
	every := idx.every
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		// Count newlines a block at a time (bytes.Count is vectorised) and
		// only walk line by line inside the block holding a checkpoint.
		for pos := 0; pos < len(chunk); {
			need := every - lines%every
			end := min(pos+4096, len(chunk))
			if c := bytes.Count(chunk[pos:end], nl); c < need {
				lines += c
				pos = end
				continue
			}
			for ; need > 0; need-- {
				pos += bytes.IndexByte(chunk[pos:], '\n') + 1
				lines++
			}
			idx.checkpoints = append(idx.checkpoints, off+int64(pos))
		}
		if n > 0 {
			last = buf[n-1]
			if check != nil {
				check.feed(chunk)
			}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return readFailed(err)
		}
	}
	idx.size = off
	idx.endsWithNL = off > idx.textStart && last == '\n'
	idx.totalLines = lines
	if off > idx.textStart && last != '\n' {
		idx.totalLines++
	}
	return nil
}

// scanUnits indexes UTF-16 text. Chunks are read whole (io.ReadFull) and
// have an even length, so every chunk starts at a code-unit boundary.
func (idx *lineIndex) scanUnits(r io.Reader) error {
	buf := make([]byte, 1<<20)
	off := idx.textStart
	lines := 0
	lastEnd := idx.textStart // where the text after the last newline starts
	for {
		n, err := io.ReadFull(r, buf)
		chunk := buf[:n]
		for pos := 0; ; {
			next := idx.nl.next(chunk, pos)
			if next < 0 {
				break
			}
			lines++
			lastEnd = off + int64(next)
			if lines%idx.every == 0 {
				idx.checkpoints = append(idx.checkpoints, lastEnd)
			}
			pos = next
		}
		off += int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return readFailed(err)
		}
	}
	idx.size = off
	idx.endsWithNL = off > idx.textStart && lastEnd == off
	idx.totalLines = lines
	if lastEnd < off {
		idx.totalLines++
	}
	return nil
}

// lineOffset returns the byte offset where line n (1-based) starts; line
// totalLines+1 "starts" at the end of the body.
func (idx *lineIndex) lineOffset(f io.ReaderAt, n int) (int64, error) {
	if n > idx.totalLines {
		return idx.size, nil
	}
	k := (n - 1) / idx.every
	return idx.skipLines(f, idx.checkpoints[k], n-1-k*idx.every)
}

// lineRange returns the byte range [from, to) of lines start..end (end =
// start-1 gives the empty range before line start). When both ends lie
// between the same two checkpoints, the scan for the end goes on from the
// start instead of from the checkpoint again.
func (idx *lineIndex) lineRange(f io.ReaderAt, start, end int) (from, to int64, err error) {
	if from, err = idx.lineOffset(f, start); err != nil {
		return 0, 0, err
	}
	if end+1 > idx.totalLines {
		return from, idx.size, nil
	}
	if (start-1)/idx.every == end/idx.every {
		to, err = idx.skipLines(f, from, end+1-start)
	} else {
		to, err = idx.lineOffset(f, end+1)
	}
	return from, to, err
}

// scanBufs recycles the buffers lineOffset scans with.
var scanBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// skipLines returns the offset of the line that starts skip lines after
// the line starting at off.
func (idx *lineIndex) skipLines(f io.ReaderAt, off int64, skip int) (int64, error) {
	if skip == 0 {
		return off, nil
	}
	// Reads start at line starts and have an even length, so UTF-16
	// chunks stay aligned to code units.
	bp := scanBufs.Get().(*[]byte)
	defer scanBufs.Put(bp)
	buf := *bp
	for {
		m, err := f.ReadAt(buf, off)
		chunk := buf[:m]
		pos := 0
		for skip > 0 {
			next := idx.nl.next(chunk, pos)
			if next < 0 {
				break
			}
			pos = next
			skip--
		}
		if skip == 0 {
			return off + int64(pos), nil
		}
		if err == io.EOF || m == 0 {
			return idx.size, nil
		}
		if err != nil {
			return 0, readFailed(err)
		}
		// Carry on from the last whole code unit read.
		off += int64(m &^ (idx.nl.unit - 1))
	}
}

// decode turns the bytes of whole lines into text.
func (idx *lineIndex) decode(b []byte) (string, error) {
	if idx.enc.IsUTF8() {
		return toValidUTF8(b), nil
	}
	s, err := idx.enc.Decode(b)
	if err != nil {
		return "", apierr.Wrap(apierr.FileReadFailed, err, "decoding %s text failed: %v", idx.enc, err)
	}
	return s, nil
}

func readFailed(err error) error {
	return apierr.Wrap(apierr.FileReadFailed, err, "reading the file failed: %v", err)
}

// indexCache keeps the line indexes of recently used bodies, keyed by
// sha256, so that a changed file never uses a stale index.
type indexCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element
	order   *list.List
	// building serialises the first build of one body's index.
	building map[string]*sync.Mutex
}

type cacheEntry struct {
	key string
	idx *lineIndex
}

func newIndexCache(max int) *indexCache {
	return &indexCache{max: max, entries: map[string]*list.Element{}, order: list.New(), building: map[string]*sync.Mutex{}}
}

// get returns the index of the body at path whose sha256 is sum, detecting
// its encoding and indexing its lines the first time.
func (c *indexCache) get(ctx context.Context, sum, path string) (*lineIndex, error) {
	c.mu.Lock()
	if e, ok := c.entries[sum]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cacheEntry).idx, nil
	}
	b := c.building[sum]
	if b == nil {
		b = &sync.Mutex{}
		c.building[sum] = b
	}
	c.mu.Unlock()

	b.Lock()
	defer b.Unlock()
	c.mu.Lock()
	if e, ok := c.entries[sum]; ok {
		c.mu.Unlock()
		return e.Value.(*cacheEntry).idx, nil
	}
	c.mu.Unlock()
	idx, err := indexFile(ctx, path)
	if err != nil {
		c.mu.Lock()
		delete(c.building, sum)
		c.mu.Unlock()
		return nil, err
	}
	c.put(sum, idx)
	return idx, nil
}

// indexFile detects the encoding of the body at path and indexes its lines.
// It decides what it can from the first SniffBytes, as textenc.Detect does
// (a byte order mark, UTF-16's pattern of NULs, binary bytes), and checks
// that a body whose start is UTF-8 is UTF-8 throughout while it indexes
// it, so that the common case reads the body once. Only a body that is
// not UTF-8 is read again, by textenc.Detect, to name its legacy encoding.
func indexFile(ctx context.Context, path string) (*lineIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot open the file: %v", err)
	}
	defer f.Close()
	head := make([]byte, textenc.SniffBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, readFailed(err)
	}
	head = head[:n]
	if n == textenc.SniffBytes {
		head = head[:completeRunes(head)]
	}
	enc, err := textenc.DetectBytes(head)
	binary := errors.Is(err, textenc.ErrBinary)
	switch {
	case binary:
		enc = textenc.UTF8
	case err != nil:
		return nil, apierr.From(err)
	}
	detectAll := func() error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return readFailed(err)
		}
		e, err := textenc.Detect(ctx, f)
		if err != nil {
			return apierr.From(err)
		}
		enc = e
		return nil
	}
	legacy := !binary && !enc.IsUTF8() && newlineOf(enc).unit == 1
	if legacy {
		// The start is not UTF-8: let the detector see the whole text.
		if err := detectAll(); err != nil {
			return nil, err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, readFailed(err)
	}
	checkUTF8 := !binary && enc.Name == "utf-8" && !enc.BOM
	idx, err := buildIndex(f, enc, checkpointEvery, checkUTF8)
	if err != nil {
		return nil, err
	}
	if checkUTF8 && !idx.validUTF8 {
		// Legacy bytes past the start; the line structure stays (every
		// legacy encoding writes "\n" as 0x0A), only the name changes.
		if err := detectAll(); err != nil {
			return nil, err
		}
		idx.enc = enc
	}
	idx.binary = binary
	return idx, nil
}

// completeRunes is the length of b without a UTF-8 sequence cut off at
// its end.
func completeRunes(b []byte) int {
	for i := 1; i < utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return len(b) - i
			}
			break
		}
	}
	return len(b)
}

// utf8Check validates a text fed to it in chunks that may split a
// character.
type utf8Check struct {
	valid bool
	carry [utf8.UTFMax]byte
	n     int // bytes in carry
}

func (v *utf8Check) feed(b []byte) {
	if !v.valid {
		return
	}
	if v.n > 0 {
		// Complete the character the last chunk cut off.
		var tmp [2 * utf8.UTFMax]byte
		k := copy(tmp[:], v.carry[:v.n])
		k += copy(tmp[k:], b[:min(len(b), utf8.UTFMax)])
		if !utf8.FullRune(tmp[:k]) {
			if len(b) < utf8.UTFMax { // still incomplete: wait for more
				v.n = copy(v.carry[:], tmp[:k])
				return
			}
		}
		r, size := utf8.DecodeRune(tmp[:k])
		if (r == utf8.RuneError && size <= 1) || size <= v.n {
			v.valid = false
			return
		}
		b = b[size-v.n:]
		v.n = 0
	}
	cut := completeRunes(b)
	if !utf8.Valid(b[:cut]) {
		v.valid = false
		return
	}
	v.n = copy(v.carry[:], b[cut:])
}

// end reports whether the whole text was valid.
func (v *utf8Check) end() bool { return v.valid && v.n == 0 }

func (c *indexCache) put(sum string, idx *lineIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.building, sum)
	if _, ok := c.entries[sum]; ok {
		return
	}
	c.entries[sum] = c.order.PushFront(&cacheEntry{sum, idx})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).key)
	}
}
