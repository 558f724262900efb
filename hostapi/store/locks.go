package store

import (
	"context"
	"os"
	"sync"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Per-file coordination inside one process. Bodies are immutable (a write
// makes a new body under a new name and points the row at it), so readers
// and writers need not exclude each other:
//
//   - writers of one file take its writer slot, one at a time, so that a
//     read-modify-write never loses an update;
//   - readers pin the file while they use a body; a writer that replaces or
//     deletes a body while it is pinned retires it instead of removing it,
//     and the last reader to leave removes what was retired.
//
// So a reader never waits for a writer (a slow upload that overwrites a file
// does not stall reads of it: they see the old body until the new one
// commits), and a writer never waits for readers.
type lockTable struct {
	mu    sync.Mutex
	locks map[string]*fileLock
}

type fileLock struct {
	writer chan struct{} // holds a token while a writer owns the file
	refs   int           // guarded by lockTable.mu: holders and waiters

	mu      sync.Mutex
	readers int
	retired []string // bodies to remove when readers drops to 0
}

func (t *lockTable) acquire(id string) *fileLock {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.locks == nil {
		t.locks = map[string]*fileLock{}
	}
	l := t.locks[id]
	if l == nil {
		l = &fileLock{writer: make(chan struct{}, 1)}
		t.locks[id] = l
	}
	l.refs++
	return l
}

func (t *lockTable) release(id string, l *fileLock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(t.locks, id)
	}
}

// pin marks file id as being read and returns the function that ends the
// read (removing bodies retired meanwhile).
func (t *lockTable) pin(id string) func() {
	l := t.acquire(id)
	l.mu.Lock()
	l.readers++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.readers--
			if l.readers == 0 {
				// Removed under the lock (as in retire): a reader that
				// pins next and still finds the body must be able to
				// count on it.
				for _, p := range l.retired {
					os.Remove(p)
				}
				l.retired = nil
			}
			l.mu.Unlock()
			t.release(id, l)
		})
	}
}

// lockWriter takes file id's writer slot, waiting at most as long as ctx
// allows, and returns its release function.
func (t *lockTable) lockWriter(ctx context.Context, id string) (func(), error) {
	l := t.acquire(id)
	select {
	case l.writer <- struct{}{}:
	default:
		select {
		case l.writer <- struct{}{}:
		case <-ctx.Done():
			t.release(id, l)
			return nil, apierr.Wrap(apierr.Of(ctx.Err()).Code, ctx.Err(),
				"gave up waiting for another write to the same file to finish; try again")
		}
	}
	return func() { <-l.writer; t.release(id, l) }, nil
}

// retire removes body path of file id now, or when the file's last reader
// leaves. The caller holds the file's writer slot (so the entry exists).
func (t *lockTable) retire(id, path string) {
	t.mu.Lock()
	l := t.locks[id]
	t.mu.Unlock()
	if l == nil {
		os.Remove(path)
		return
	}
	// The removal happens under the lock that pin takes: a reader pins,
	// then checks that the body is there, and from then on relies on it.
	// Removed after the unlock, a body could vanish between a reader's
	// check and its read (TestReadersNeverFailDuringOverwrites saw it).
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers > 0 {
		l.retired = append(l.retired, path)
		return
	}
	os.Remove(path)
}

// isRetired reports whether path waits for its readers to leave (fsck must
// not count it as an orphan to delete under them).
func (t *lockTable) isRetired(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.locks {
		l.mu.Lock()
		for _, p := range l.retired {
			if p == path {
				l.mu.Unlock()
				return true
			}
		}
		l.mu.Unlock()
	}
	return false
}

// drainRetired removes every retired body (at Close: no reads are left).
func (t *lockTable) drainRetired() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.locks {
		l.mu.Lock()
		for _, p := range l.retired {
			os.Remove(p)
		}
		l.retired = nil
		l.mu.Unlock()
	}
}
