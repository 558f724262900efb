package store

import "sync"

// lockTable hands out one reader/writer lock per file id, created on first use
// and dropped when nobody holds or waits for it.
type lockTable struct {
	mu    sync.Mutex
	locks map[string]*fileLock
}

type fileLock struct {
	rw   sync.RWMutex
	refs int
}

func (t *lockTable) acquire(id string) *fileLock {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.locks == nil {
		t.locks = map[string]*fileLock{}
	}
	l := t.locks[id]
	if l == nil {
		l = &fileLock{}
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

// rlock takes the read lock of id and returns its release function.
func (t *lockTable) rlock(id string) func() {
	l := t.acquire(id)
	l.rw.RLock()
	return func() { l.rw.RUnlock(); t.release(id, l) }
}

// wlock takes the write lock of id and returns its release function.
func (t *lockTable) wlock(id string) func() {
	l := t.acquire(id)
	l.rw.Lock()
	return func() { l.rw.Unlock(); t.release(id, l) }
}
