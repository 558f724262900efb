package store

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// BodyWriter streams a new body into a temp file while hashing it, keeping
// its first bytes for MIME detection and holding quota for it. It enforces
// the per-file limit and the workspace quota as bytes arrive, so an
// oversized upload is stopped early, never after it has filled the disk.
type BodyWriter struct {
	s        *Store
	ws       string
	f        *os.File
	tmp      string
	h        hash.Hash
	n        int64
	head     []byte
	reserved int64
	// credit is the size of the body being replaced: a rewrite only needs
	// quota for what it adds beyond it.
	credit int64
	err    error
	done   bool
}

func (s *Store) newBodyWriter(ws string) (*BodyWriter, error) {
	f, err := os.CreateTemp(s.tmpDir, "body-*")
	if err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot create a temporary file: %v", err)
	}
	return &BodyWriter{s: s, ws: ws, f: f, tmp: f.Name(), h: sha256.New()}, nil
}

// Write implements io.Writer.
func (b *BodyWriter) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	maxFile, _ := b.s.Limits()
	if b.n+int64(len(p)) > maxFile {
		b.err = apierr.New(apierr.TooLarge, "file would exceed the %s per-file limit", humanBytes(maxFile))
		return 0, b.err
	}
	if need := b.n + int64(len(p)) - b.credit - b.reserved; need > 0 {
		if err := b.s.reserve(b.ws, need); err != nil {
			b.err = err
			return 0, err
		}
		b.reserved += need
	}
	if len(b.head) < sniffLen {
		k := min(sniffLen-len(b.head), len(p))
		b.head = append(b.head, p[:k]...)
	}
	n, err := b.f.Write(p)
	b.n += int64(n)
	b.h.Write(p[:n])
	if err != nil {
		b.err = apierr.Wrap(apierr.FileWriteFailed, err, "write failed: %v", err)
		return n, b.err
	}
	return n, nil
}

// Size is the number of bytes written so far.
func (b *BodyWriter) Size() int64 { return b.n }

// body is a finished, durable body waiting for its metadata transaction.
type body struct {
	diskPath string // relative to files/
	size     int64
	sha256   string
	head     []byte
	reserved int64
}

// finish makes the body durable under a generated name.
func (b *BodyWriter) finish() (*body, error) {
	if b.err != nil {
		b.abort()
		return nil, b.err
	}
	if err := b.f.Sync(); err != nil {
		b.abort()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "fsync failed: %v", err)
	}
	if err := b.f.Close(); err != nil {
		b.abort()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "close failed: %v", err)
	}
	name := uuid.NewString()
	if err := os.Rename(b.tmp, filepath.Join(b.s.filesDir, name)); err != nil {
		b.abort()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "rename failed: %v", err)
	}
	b.done = true
	syncDir(b.s.filesDir)
	return &body{diskPath: name, size: b.n, sha256: hex.EncodeToString(b.h.Sum(nil)), head: b.head, reserved: b.reserved}, nil
}

// abort drops the temp file and gives back the reserved quota.
func (b *BodyWriter) abort() {
	if b.done {
		return
	}
	b.done = true
	b.f.Close()
	os.Remove(b.tmp)
	b.s.unreserve(b.ws, b.reserved)
	b.reserved = 0
}

// syncDir fsyncs a directory so that a rename in it survives a crash.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
