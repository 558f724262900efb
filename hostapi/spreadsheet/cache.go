package spreadsheet

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The decoded sheet cache. Paging through a big sheet must not re-parse its
// XML from the top for every page, so the first deep read decodes the whole
// sheet once into a compact file under CacheDir()/spreadsheet, named by the
// workbook's sha256 (a changed file never reads a stale cache) and the
// sheet's position. A sparse row index lets a page seek straight to its
// first row; memory stays bounded by the page.
//
// Layout: magic, row records, index, JSON meta, trailer.
//   record  = uvarint row, uvarint n, n × (uvarint col, kind byte, payload)
//   payload = number: 8 bytes float64; bool: 1 byte; string, date, error:
//             uvarint length + bytes; pending formula: dateKind byte +
//             uvarint length + formula text
//   index   = every indexEvery-th record: uint32 row, uint64 offset
//   trailer = uint64 indexOff, uint64 indexCount, uint64 metaOff,
//             uint64 metaLen, magic

const (
	cacheMagic   = "MCSSC001"
	cacheVersion = "v1"
	indexEvery   = 64
	trailerSize  = 4*8 + 8
)

// cacheMeta is what a full pass learns about a sheet.
type cacheMeta struct {
	Rows        int      `json:"rows"`    // last row holding a value
	Columns     int      `json:"columns"` // last column holding a value
	HeaderRow   int      `json:"headerRow"`
	ColumnTypes []string `json:"columnTypes"`
	Pending     int      `json:"pending"`
}

// type bits per column for columnTypes.
const (
	tNumber uint8 = 1 << iota
	tString
	tDate
	tBool
)

type cacheBuilder struct {
	w       *bufio.Writer
	off     int64
	nrec    int
	index   []byte
	lastRow int
	scratch []byte
	meta    cacheMeta
	decided bool
	types   []uint8
}

func newCacheBuilder(w io.Writer) *cacheBuilder {
	b := &cacheBuilder{w: bufio.NewWriterSize(w, 256<<10)}
	b.write([]byte(cacheMagic))
	return b
}

func (b *cacheBuilder) write(p []byte) {
	n, _ := b.w.Write(p) // bufio keeps the first error; finish reports it
	b.off += int64(n)
}

var errRowOrder = errors.New("rows are stored out of order")

func (b *cacheBuilder) add(row int, vals []colValue) (bool, error) {
	if row <= b.lastRow {
		return false, errRowOrder
	}
	b.lastRow = row
	if b.nrec%indexEvery == 0 {
		b.index = binary.LittleEndian.AppendUint32(b.index, uint32(row))
		b.index = binary.LittleEndian.AppendUint64(b.index, uint64(b.off))
	}
	b.nrec++
	s := b.scratch[:0]
	s = binary.AppendUvarint(s, uint64(row))
	s = binary.AppendUvarint(s, uint64(len(vals)))
	header := !b.decided
	if header {
		// The first row holding values is a header row when it is all text.
		b.decided = true
		b.meta.HeaderRow = row
		for _, cv := range vals {
			if cv.v.k != kString {
				b.meta.HeaderRow = 0
				header = false
				break
			}
		}
	}
	for _, cv := range vals {
		s = binary.AppendUvarint(s, uint64(cv.col))
		s = append(s, byte(cv.v.k))
		switch cv.v.k {
		case kNumber:
			s = binary.LittleEndian.AppendUint64(s, math.Float64bits(cv.v.n))
		case kBool:
			s = append(s, byte(cv.v.n))
		case kString, kDate, kError:
			s = binary.AppendUvarint(s, uint64(len(cv.v.s)))
			s = append(s, cv.v.s...)
		case kPending:
			s = append(s, byte(cv.v.n))
			s = binary.AppendUvarint(s, uint64(len(cv.v.s)))
			s = append(s, cv.v.s...)
			b.meta.Pending++
		}
		if cv.col > b.meta.Columns {
			b.meta.Columns = cv.col
		}
		if !header {
			for len(b.types) < cv.col {
				b.types = append(b.types, 0)
			}
			b.types[cv.col-1] |= typeBit(cv.v.k)
		}
	}
	b.meta.Rows = row
	b.write(s)
	b.scratch = s
	return false, nil
}

func typeBit(k kind) uint8 {
	switch k {
	case kNumber:
		return tNumber
	case kString, kError:
		return tString
	case kDate:
		return tDate
	case kBool:
		return tBool
	}
	return 0
}

func typeNames(bits []uint8, columns int) []string {
	out := make([]string, columns)
	for i := range out {
		var t uint8
		if i < len(bits) {
			t = bits[i]
		}
		switch t {
		case 0:
			out[i] = "empty"
		case tNumber:
			out[i] = "number"
		case tString:
			out[i] = "string"
		case tDate:
			out[i] = "date"
		case tBool:
			out[i] = "boolean"
		default:
			out[i] = "mixed"
		}
	}
	return out
}

func (b *cacheBuilder) finish() (cacheMeta, error) {
	b.meta.ColumnTypes = typeNames(b.types, b.meta.Columns)
	indexOff := b.off
	b.write(b.index)
	metaOff := b.off
	mj, err := json.Marshal(b.meta)
	if err != nil {
		return b.meta, err
	}
	b.write(mj)
	var t []byte
	t = binary.LittleEndian.AppendUint64(t, uint64(indexOff))
	t = binary.LittleEndian.AppendUint64(t, uint64(len(b.index)/12))
	t = binary.LittleEndian.AppendUint64(t, uint64(metaOff))
	t = binary.LittleEndian.AppendUint64(t, uint64(len(mj)))
	t = append(t, cacheMagic...)
	b.write(t)
	return b.meta, b.w.Flush()
}

// cacheFile is an open decoded sheet.
type cacheFile struct {
	f       *os.File
	meta    cacheMeta
	index   []byte
	dataEnd int64
}

func openCache(p string) (*cacheFile, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	cf, err := readCacheHeader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return cf, nil
}

var errBadCache = errors.New("damaged sheet cache")

func readCacheHeader(f *os.File) (*cacheFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < int64(len(cacheMagic))+trailerSize {
		return nil, errBadCache
	}
	t := make([]byte, trailerSize)
	if _, err := f.ReadAt(t, size-trailerSize); err != nil {
		return nil, err
	}
	if string(t[32:]) != cacheMagic {
		return nil, errBadCache
	}
	indexOff := int64(binary.LittleEndian.Uint64(t[0:]))
	indexCount := int64(binary.LittleEndian.Uint64(t[8:]))
	metaOff := int64(binary.LittleEndian.Uint64(t[16:]))
	metaLen := int64(binary.LittleEndian.Uint64(t[24:]))
	if indexOff < 8 || indexCount < 0 || indexCount > size/12 || indexOff+indexCount*12 != metaOff || metaOff+metaLen != size-trailerSize {
		return nil, errBadCache
	}
	buf := make([]byte, indexCount*12+metaLen)
	if _, err := f.ReadAt(buf, indexOff); err != nil {
		return nil, err
	}
	cf := &cacheFile{f: f, index: buf[:indexCount*12], dataEnd: indexOff}
	if err := json.Unmarshal(buf[indexCount*12:], &cf.meta); err != nil {
		return nil, errBadCache
	}
	return cf, nil
}

func (cf *cacheFile) Close() error { return cf.f.Close() }

// rows calls fn for every stored row in r1..r2, in order.
func (cf *cacheFile) rows(ctx context.Context, r1, r2 int, fn func(row int, vals []colValue) error) error {
	n := len(cf.index) / 12
	// The last index entry whose row is ≤ r1.
	i := sort.Search(n, func(i int) bool { return int(binary.LittleEndian.Uint32(cf.index[i*12:])) > r1 }) - 1
	if i < 0 {
		i = 0
	}
	if n == 0 {
		return nil
	}
	off := int64(binary.LittleEndian.Uint64(cf.index[i*12+4:]))
	br := bufio.NewReaderSize(io.NewSectionReader(cf.f, off, cf.dataEnd-off), 64<<10)
	var vals []colValue
	for count := 0; ; count++ {
		if count&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		row, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errBadCache
		}
		if int(row) > r2 {
			return nil
		}
		nc, err := binary.ReadUvarint(br)
		if err != nil || nc > maxCols {
			return errBadCache
		}
		vals = vals[:0]
		for j := uint64(0); j < nc; j++ {
			v, err := readCacheValue(br)
			if err != nil {
				return err
			}
			vals = append(vals, v)
		}
		if int(row) >= r1 {
			if err := fn(int(row), vals); err != nil {
				return err
			}
		}
	}
}

func readCacheValue(br *bufio.Reader) (colValue, error) {
	col, err := binary.ReadUvarint(br)
	if err != nil || col > maxCols {
		return colValue{}, errBadCache
	}
	kb, err := br.ReadByte()
	if err != nil {
		return colValue{}, errBadCache
	}
	cv := colValue{col: int(col), v: value{k: kind(kb)}}
	readStr := func() error {
		l, err := binary.ReadUvarint(br)
		if err != nil || l > 1<<30 {
			return errBadCache
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return errBadCache
		}
		cv.v.s = string(b)
		return nil
	}
	switch cv.v.k {
	case kNumber:
		var b [8]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return cv, errBadCache
		}
		cv.v.n = math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
	case kBool:
		b, err := br.ReadByte()
		if err != nil {
			return cv, errBadCache
		}
		cv.v.n = float64(b)
	case kString, kDate, kError:
		if err := readStr(); err != nil {
			return cv, err
		}
	case kPending:
		b, err := br.ReadByte()
		if err != nil {
			return cv, errBadCache
		}
		cv.v.n = float64(b)
		if err := readStr(); err != nil {
			return cv, err
		}
	default:
		return cv, errBadCache
	}
	return cv, nil
}

// cacheName names the decoded cache of one sheet of one file content.
func cacheName(sha string, sheet int) string {
	return fmt.Sprintf("%s-%d.%s", sha, sheet, cacheVersion)
}

// pruneCache deletes the least recently used cache files until the
// directory holds at most limit bytes. Readers touch a file's mtime.
func pruneCache(dir string, limit int64) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type item struct {
		path string
		size int64
		mod  time.Time
	}
	var items []item
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.Contains(e.Name(), ".tmp") && time.Since(info.ModTime()) < time.Hour {
			continue // a build in progress
		}
		items = append(items, item{filepath.Join(dir, e.Name()), info.Size(), info.ModTime()})
		total += info.Size()
	}
	if total <= limit {
		return
	}
	sort.Slice(items, func(i, j int) bool { return items[i].mod.Before(items[j].mod) })
	for _, it := range items {
		if total <= limit*8/10 {
			return
		}
		if os.Remove(it.path) == nil {
			total -= it.size
		}
	}
}
