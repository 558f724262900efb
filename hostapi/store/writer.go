package store

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"os"
	"path/filepath"
	"sync"

	"github.com/google/uuid"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// BodyWriter streams a new body into a temp file of this process while
// hashing it, keeping its first bytes for MIME detection and holding quota
// for it. It enforces the per-file limit and the workspace quota as bytes
// arrive, so an oversized upload is stopped early, never after it has filled
// the disk.
type BodyWriter struct {
	s        *Store
	ws       string
	f        *os.File
	tmp      string
	h        hash.Hash
	n        int64
	head     []byte
	reserved int64
	// credit is the size of a body this one replaces and that goes away
	// when it commits: a rewrite only needs quota beyond it.
	credit int64
	err    error
	done   bool
	flight func() // ends the write's registration with the store
	// resID names the reservation in a shared backend's quota ledger:
	// it is the key the body gets in the blob store, where blob streams
	// it as it arrives.
	resID string
	blob  BlobWriter
}

func (s *Store) newBodyWriter(ws string) (*BodyWriter, error) {
	flight, err := s.beginWrite()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(s.tmp.path, "body-*")
	if err != nil {
		flight()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot create a temporary file (%s); check the server's disk", ioReason(err))
	}
	bw := &BodyWriter{s: s, ws: ws, f: f, tmp: f.Name(), h: sha256.New(), flight: flight}
	if sh := s.shared; sh != nil {
		bw.resID = sh.b.HostID + "/" + uuid.NewString()
		if bw.blob, err = sh.b.Blobs.Create(s.stop, bw.resID); err != nil {
			f.Close()
			os.Remove(bw.tmp)
			flight()
			return nil, err
		}
	}
	return bw, nil
}

// Write implements io.Writer.
func (b *BodyWriter) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.s.stop.Err() != nil {
		b.err = apierr.New(apierr.FileWriteFailed, "the host is shutting down; the write was abandoned and nothing was changed")
		return 0, b.err
	}
	maxFile, _ := b.s.Limits()
	if b.n+int64(len(p)) > maxFile {
		b.err = apierr.New(apierr.TooLarge, "file would exceed the %s per-file limit", humanBytes(maxFile))
		return 0, b.err
	}
	if need := b.n + int64(len(p)) - b.credit - b.reserved; need > 0 {
		if b.s.shared != nil {
			// A shared ledger is a network round trip: reserve ahead in
			// steps, and exactly what is needed when a step does not fit.
			got, err := b.s.shared.reserve(b.ws, b.resID, need, b.n, maxFile-b.credit-b.reserved)
			if err != nil {
				b.err = err
				return 0, err
			}
			b.reserved += got
		} else {
			if err := b.s.reserve(b.ws, need); err != nil {
				b.err = err
				return 0, err
			}
			b.reserved += need
		}
	}
	if len(b.head) < sniffLen {
		k := min(sniffLen-len(b.head), len(p))
		b.head = append(b.head, p[:k]...)
	}
	n, err := b.f.Write(p)
	b.n += int64(n)
	b.h.Write(p[:n])
	if err != nil {
		b.err = apierr.Wrap(apierr.FileWriteFailed, err, "writing the new content failed (%s); check the server's disk", ioReason(err))
		return n, b.err
	}
	if b.blob != nil {
		if _, err := b.blob.Write(p[:n]); err != nil {
			b.err = apierr.Wrap(apierr.FileWriteFailed, err, "sending the new content to the shared store failed (%v); nothing was changed, try again", err)
			return n, b.err
		}
	}
	return n, nil
}

// Size is the number of bytes written so far.
func (b *BodyWriter) Size() int64 { return b.n }

// body is a finished, durable body in this process's temp directory, waiting
// for the transaction that places it and points a row at it.
type body struct {
	s        *Store
	ws       string
	tmp      string // where it is until placed
	size     int64
	sha256   string
	head     []byte
	reserved int64
	resID    string     // shared backend: the reservation and the blob key
	blob     BlobWriter // shared backend: the body on its way, until committed

	once   sync.Once
	flight func()
	placed bool
}

// finish makes the body durable in the temp directory.
func (b *BodyWriter) finish() (*body, error) {
	if b.err != nil {
		b.abort()
		return nil, b.err
	}
	// On a shared backend the blob store keeps the body durably; the temp
	// file only becomes this host's cached copy.
	if err := b.syncLocal(); err != nil {
		b.abort()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "saving the new content failed (%s); check the server's disk", ioReason(err))
	}
	if err := b.f.Close(); err != nil {
		b.abort()
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "saving the new content failed (%s); check the server's disk", ioReason(err))
	}
	b.done = true
	return &body{s: b.s, ws: b.ws, tmp: b.tmp, size: b.n, sha256: hex.EncodeToString(b.h.Sum(nil)),
		head: b.head, reserved: b.reserved, flight: b.flight, resID: b.resID, blob: b.blob}, nil
}

func (b *BodyWriter) syncLocal() error {
	if b.blob != nil {
		return nil
	}
	return b.f.Sync()
}

// abort drops the temp file and gives back the reserved quota.
func (b *BodyWriter) abort() {
	if b.done {
		return
	}
	b.done = true
	b.f.Close()
	os.Remove(b.tmp)
	if b.blob != nil {
		b.blob.Abort()
	}
	if b.s.shared != nil {
		b.s.shared.release(b.ws, b.resID)
	} else {
		b.s.unreserve(b.ws, b.reserved)
	}
	b.reserved = 0
	b.flight()
}

// placeAs moves the body into files/ as name. It runs inside tx, after the
// statements that refer to it, so that fsck (which takes the write lock to
// delete an orphan) never sees it unreferenced; if the transaction does not
// commit, the body goes back to the temp directory.
func (b *body) placeAs(tx *txn, name string) error {
	dst := filepath.Join(b.s.filesDir, name)
	if err := os.Rename(b.tmp, dst); err != nil {
		return apierr.Wrap(apierr.FileWriteFailed, err, "storing the new content failed (%s); check the server's disk", ioReason(err))
	}
	tx.onUndo(func() { os.Rename(dst, b.tmp) })
	syncDir(b.s.filesDir)
	return nil
}

// committed records that the body now belongs to a committed row; its
// reservation was settled by the commit.
func (b *body) committed() {
	b.placed = true
	b.once.Do(b.flight)
}

// discard drops a body that was not committed and gives back its quota.
func (b *body) discard() {
	b.once.Do(func() {
		if !b.placed {
			os.Remove(b.tmp)
			if b.blob != nil {
				b.blob.Abort()
			}
			if b.s.shared != nil {
				b.s.shared.release(b.ws, b.resID)
			} else {
				b.s.unreserve(b.ws, b.reserved)
			}
		}
		b.flight()
	})
}

// syncDir fsyncs a directory so that a rename in it survives a crash.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
