package files

import (
	"bytes"
	"container/list"
	"io"
	"os"
	"sync"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// checkpointEvery is how many lines lie between two remembered offsets. A
// read of lines N..M seeks to the checkpoint before N and scans at most this
// many lines to reach it, so a 1M-line file costs 32 KB of index.
const checkpointEvery = 256

var nl = []byte{'\n'}

// lineIndex describes one body (identified by its sha256): where every
// checkpointEvery-th line starts, how many lines it has and whether the
// last line ends with a newline.
type lineIndex struct {
	size        int64
	totalLines  int
	checkpoints []int64 // checkpoints[k] = offset of line k*checkpointEvery+1
	endsWithNL  bool
}

// buildLineIndex scans r once. Lines are separated by "\n"; a final "\n"
// does not start another line ("a\nb\n" has 2 lines, "" has 0).
func buildLineIndex(r io.Reader) (*lineIndex, error) {
	idx := &lineIndex{checkpoints: []int64{0}}
	buf := make([]byte, 1<<20)
	var off int64
	lines := 0 // newlines seen so far
	var last byte
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		// Count newlines a block at a time (bytes.Count is vectorised) and
		// only walk line by line inside the block holding a checkpoint.
		for pos := 0; pos < len(chunk); {
			need := checkpointEvery - lines%checkpointEvery
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
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, apierr.Wrap(apierr.FileReadFailed, err, "reading the file failed: %v", err)
		}
	}
	idx.size = off
	idx.endsWithNL = off > 0 && last == '\n'
	idx.totalLines = lines
	if off > 0 && last != '\n' {
		idx.totalLines++
	}
	// A checkpoint at the very end (after a final newline) starts no line.
	if k := len(idx.checkpoints) - 1; k > 0 && idx.checkpoints[k] >= off {
		idx.checkpoints = idx.checkpoints[:k]
	}
	return idx, nil
}

// lineOffset returns the byte offset where line n (1-based) starts; line
// totalLines+1 "starts" at the end of the body.
func (idx *lineIndex) lineOffset(f io.ReaderAt, n int) (int64, error) {
	if n > idx.totalLines {
		return idx.size, nil
	}
	k := (n - 1) / checkpointEvery
	off := idx.checkpoints[k]
	skip := n - 1 - k*checkpointEvery
	if skip == 0 {
		return off, nil
	}
	buf := make([]byte, 64<<10)
	for {
		m, err := f.ReadAt(buf, off)
		chunk := buf[:m]
		pos := 0
		for skip > 0 {
			i := bytes.IndexByte(chunk[pos:], '\n')
			if i < 0 {
				break
			}
			pos += i + 1
			skip--
		}
		if skip == 0 {
			return off + int64(pos), nil
		}
		off += int64(m)
		if err == io.EOF || m == 0 {
			return idx.size, nil
		}
		if err != nil {
			return 0, apierr.Wrap(apierr.FileReadFailed, err, "reading the file failed: %v", err)
		}
	}
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

// get returns the index of the body at path whose sha256 is sum.
func (c *indexCache) get(sum, path string) (*lineIndex, error) {
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
	f, err := os.Open(path)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot open the file: %v", err)
	}
	defer f.Close()
	idx, err := buildLineIndex(f)
	if err != nil {
		return nil, err
	}
	c.put(sum, idx)
	return idx, nil
}

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
