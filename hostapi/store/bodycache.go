package store

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// bodyCache keeps local copies of bodies fetched from a shared backend,
// because format libraries (excelize, pdfcpu, DuckDB, libvips) want a path.
// Entries are named by their sha256, so a cached body never goes stale and
// is checked once, as it arrives. The cache is bounded: the least recently
// used bodies that nobody is reading are removed when it grows past its
// size. A body written by this host goes into the cache as it commits, so
// a host reads back its own writes without fetching them.
type bodyCache struct {
	dir string
	max int64

	mu      sync.Mutex
	entries map[string]*cacheEntry
	lru     list.List // of *cacheEntry, most recent at the front
	total   int64
	filling map[string]*fill
}

type cacheEntry struct {
	sha  string
	size int64
	pins int
	elem *list.Element
}

type fill struct {
	done chan struct{}
	err  error
}

func newBodyCache(dir string, max int64) (*bodyCache, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	c := &bodyCache{dir: dir, max: max, entries: map[string]*cacheEntry{}, filling: map[string]*fill{}}
	// What an earlier run left is still good: it is named by its content.
	// Half-written fills (".part") are not.
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, ".part") || len(name) != 64 {
			os.Remove(p)
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			c.insertLocked(name, fi.Size())
		}
		return nil
	})
	c.evictLocked()
	return c, nil
}

func (c *bodyCache) path(sha string) string {
	return filepath.Join(c.dir, sha[:2], sha)
}

// insertLocked records a body that is now in place, unpinned.
func (c *bodyCache) insertLocked(sha string, size int64) *cacheEntry {
	if e := c.entries[sha]; e != nil {
		return e
	}
	e := &cacheEntry{sha: sha, size: size}
	e.elem = c.lru.PushFront(e)
	c.entries[sha] = e
	c.total += size
	return e
}

// evictLocked removes unpinned bodies, least recently used first, until
// the cache fits its bound.
func (c *bodyCache) evictLocked() {
	for el := c.lru.Back(); el != nil && c.total > c.max; {
		prev := el.Prev()
		e := el.Value.(*cacheEntry)
		if e.pins == 0 {
			os.Remove(c.path(e.sha))
			c.lru.Remove(el)
			delete(c.entries, e.sha)
			c.total -= e.size
		}
		el = prev
	}
}

// pin returns the path of a cached body and the function that ends its
// use, or ok=false when it is not cached.
func (c *bodyCache) pin(sha string) (path string, unpin func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[sha]
	if e == nil {
		return "", nil, false
	}
	return c.path(sha), c.pinLocked(e), true
}

func (c *bodyCache) pinLocked(e *cacheEntry) func() {
	e.pins++
	c.lru.MoveToFront(e.elem)
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			e.pins--
			c.evictLocked()
			c.mu.Unlock()
		})
	}
}

// acquire returns a pinned local copy of body ref, fetching it with get
// when it is not cached. Concurrent acquires of one body fetch it once.
func (c *bodyCache) acquire(ctx context.Context, ref BodyRef, get func(ctx context.Context, key string) (io.ReadCloser, error)) (string, func(), error) {
	if len(ref.SHA256) != 64 {
		return "", nil, apierr.New(apierr.Internal, "a file record has no content hash; run `metaclaw fsck`")
	}
	for {
		if p, unpin, ok := c.pin(ref.SHA256); ok {
			return p, unpin, nil
		}
		c.mu.Lock()
		if c.entries[ref.SHA256] != nil {
			c.mu.Unlock()
			continue
		}
		f := c.filling[ref.SHA256]
		if f == nil {
			f = &fill{done: make(chan struct{})}
			c.filling[ref.SHA256] = f
			c.mu.Unlock()
			var unpin func()
			unpin, f.err = c.fetch(ctx, ref, get)
			c.mu.Lock()
			delete(c.filling, ref.SHA256)
			close(f.done)
			c.mu.Unlock()
			if f.err != nil {
				return "", nil, f.err
			}
			return c.path(ref.SHA256), unpin, nil
		}
		c.mu.Unlock()
		select {
		case <-f.done:
			if f.err != nil {
				return "", nil, f.err
			}
		case <-ctx.Done():
			return "", nil, apierr.From(ctx.Err())
		}
	}
}

// fetch downloads a body into the cache, checking its size and hash.
func (c *bodyCache) fetch(ctx context.Context, ref BodyRef, get func(ctx context.Context, key string) (io.ReadCloser, error)) (func(), error) {
	rc, err := get(ctx, ref.Blob)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	final := c.path(ref.SHA256)
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot fill the body cache (%s); check the server's disk", ioReason(err))
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), "fill-*.part")
	if err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "cannot fill the body cache (%s); check the server's disk", ioReason(err))
	}
	h := sha256.New()
	bp := copyBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(io.MultiWriter(tmp, h), rc, *bp)
	copyBufs.Put(bp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		if e := ctx.Err(); e != nil {
			return nil, apierr.From(e)
		}
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "fetching the content from the shared store failed (%v); try again", err)
	}
	if n != ref.Size || hex.EncodeToString(h.Sum(nil)) != ref.SHA256 {
		os.Remove(tmp.Name())
		return nil, apierr.New(apierr.FileReadFailed, "the shared store returned content that does not match the file's size and sha256; run `metaclaw fsck`")
	}
	return c.place(tmp.Name(), ref.SHA256, n)
}

// place moves a complete, checked body at tmp into the cache and returns
// it pinned (so that a cache smaller than the body still hands it out).
func (c *bodyCache) place(tmp, sha string, size int64) (func(), error) {
	final := c.path(sha)
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		os.Remove(tmp)
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot fill the body cache (%s)", ioReason(err))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[sha]
	if e != nil {
		os.Remove(tmp)
	} else {
		if err := os.Rename(tmp, final); err != nil {
			os.Remove(tmp)
			return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot fill the body cache (%s)", ioReason(err))
		}
		e = c.insertLocked(sha, size)
	}
	return c.pinLocked(e), nil
}
