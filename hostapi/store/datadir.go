package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Coordination between processes that share a data directory uses flock(2)
// locks, which the kernel drops when their holder dies however it dies, so
// that a crash never leaves a stale lock behind:
//
//   - data/server.lock is held exclusively by `metaclaw serve` for its whole
//     life (LockServer) and by fsck while it runs: a second server, or an
//     fsck beside a server, is refused with the holder's identity. Local CLI
//     commands do not take it; they work beside a server.
//   - every open Store writes its temp files in a directory of its own,
//     files/.tmp/<pid>.<random>, which it holds locked. A directory whose lock
//     can be taken belongs to a process that is gone, so its contents are
//     leftovers of an interrupted write and are removed; a live process's
//     temp files are never touched.

const serverLockName = "server.lock"

// flock takes an flock(2) lock on fd without blocking.
func flock(fd uintptr, how int) error {
	for {
		err := syscall.Flock(int(fd), how|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

func isWouldBlock(err error) bool {
	return errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN)
}

// serverLocks are the server locks this process holds, by the lock file's
// identity, so that this process's own fsck does not refuse itself. flock
// locks belong to open files, so a second lock from the same process would
// conflict with the first.
var serverLocks = struct {
	sync.Mutex
	held map[fileKey]bool
}{held: map[fileKey]bool{}}

type fileKey struct{ dev, ino uint64 }

func keyOf(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{uint64(st.Dev), uint64(st.Ino)}, true
}

// LockServer takes the data directory's server lock for the caller's
// lifetime: `metaclaw serve` holds it so that a second server on the same
// data directory, and an fsck beside it, refuse to start. The error is BUSY
// and says which process holds the lock. release gives it back (exiting
// does too).
func LockServer(dir string) (release func(), err error) {
	release, holder, err := lockServer(dir, "metaclaw serve")
	if err == errLockHeld {
		return nil, apierr.New(apierr.Busy,
			"this data directory is already served by %s; stop that server first, or send commands to it with --server URL", holder)
	}
	return release, err
}

// errLockHeld says another holder has the server lock.
var errLockHeld = errors.New("the server lock is held")

// lockServer takes the server lock on behalf of role ("metaclaw serve",
// "metaclaw fsck") and records who holds it. When someone else holds it, it
// returns errLockHeld and a description of the holder.
func lockServer(dir, role string) (release func(), holder string, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, "", apierr.Wrap(apierr.Internal, err, "cannot create the data directory: %s", ioReason(err))
	}
	path := filepath.Join(dir, serverLockName)
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o640)
	if err != nil {
		return nil, "", apierr.Wrap(apierr.Internal, err, "cannot open the data directory's lock file: %s", ioReason(err))
	}
	fi, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, "", apierr.Wrap(apierr.Internal, err, "cannot read the data directory's lock file: %s", ioReason(err))
	}
	key, _ := keyOf(fi)
	serverLocks.Lock()
	defer serverLocks.Unlock()
	if serverLocks.held[key] {
		fh.Close()
		return nil, readHolder(path) + " (this process)", errLockHeld
	}
	if err := flock(fh.Fd(), syscall.LOCK_EX); err != nil {
		fh.Close()
		if isWouldBlock(err) {
			return nil, readHolder(path), errLockHeld
		}
		return nil, "", apierr.Wrap(apierr.Internal, err, "cannot lock the data directory: %s", ioReason(err))
	}
	serverLocks.held[key] = true
	// Say who we are, for the message of whoever is refused next.
	fh.Truncate(0)
	fh.WriteAt([]byte(fmt.Sprintf("pid %d\nrole %s\nsince %s\n", os.Getpid(), role, time.Now().UTC().Format(time.RFC3339))), 0)
	var once sync.Once
	return func() {
		once.Do(func() {
			serverLocks.Lock()
			delete(serverLocks.held, key)
			serverLocks.Unlock()
			fh.Truncate(0)
			fh.Close() // drops the flock
		})
	}, "", nil
}

// heldByThisProcess reports whether this process holds dir's server lock.
func heldByThisProcess(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, serverLockName))
	if err != nil {
		return false
	}
	key, ok := keyOf(fi)
	if !ok {
		return false
	}
	serverLocks.Lock()
	defer serverLocks.Unlock()
	return serverLocks.held[key]
}

// readHolder describes the holder of the lock file at path from what it
// wrote there: "process 4242 (metaclaw serve, since 2024-05-01T10:00:00Z)".
func readHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "another process"
	}
	var pid, role, since string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			if _, err := strconv.Atoi(v); err == nil {
				pid = v
			}
		case "role":
			role = v
		case "since":
			since = v
		}
	}
	if pid == "" {
		return "another process"
	}
	s := "process " + pid
	switch {
	case role != "" && since != "":
		s += " (" + role + ", since " + since + ")"
	case role != "":
		s += " (" + role + ")"
	}
	return s
}

// procTempDir is this Store's own directory for temp files, held locked.
type procTempDir struct {
	path string
	fh   *os.File
}

func newProcTempDir(tmpRoot string) (*procTempDir, error) {
	// Between creating the directory and locking it, another process
	// starting on the same data directory may take it for a dead
	// process's (it is unlocked) and remove it: then this one's lock is
	// on a directory that is gone. Lock, check it is still there, and
	// start again with a new one if not.
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		path, err := os.MkdirTemp(tmpRoot, strconv.Itoa(os.Getpid())+".")
		if err != nil {
			return nil, err
		}
		fh, err := os.Open(path)
		if err != nil {
			lastErr = err
			continue // removed already
		}
		if err := flock(fh.Fd(), syscall.LOCK_EX); err != nil {
			fh.Close() // another process is removing it
			lastErr = err
			continue
		}
		held, err1 := fh.Stat()
		now, err2 := os.Stat(path)
		if err1 != nil || err2 != nil || !os.SameFile(held, now) {
			fh.Close()
			lastErr = errors.Join(err1, err2, os.ErrNotExist)
			continue
		}
		return &procTempDir{path: path, fh: fh}, nil
	}
	return nil, lastErr
}

// close removes the directory and everything left in it, then unlocks.
func (d *procTempDir) close() {
	os.RemoveAll(d.path)
	d.fh.Close()
}

// deadTempEntries lists what in tmpRoot belongs to no live process: temp
// directories of processes that are gone (the process its name starts
// with does not exist, and its lock can be taken) and loose files (earlier
// versions wrote temp files directly in tmpRoot). own is skipped. Each
// dead directory is returned still locked by the caller; call the
// returned unlock functions after removing it.
//
// The lock alone leaves a window: a directory made a moment ago by a live
// process and not yet locked looks dead. The process check closes it
// (newProcTempDir still verifies what it locked). A directory of a dead
// process whose number is taken again by a live one waits for that one.
func deadTempEntries(tmpRoot, own string) (dead []string, unlock []func()) {
	entries, err := os.ReadDir(tmpRoot)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		p := filepath.Join(tmpRoot, e.Name())
		if p == own {
			continue
		}
		if !e.IsDir() {
			dead = append(dead, p)
			continue
		}
		if processExists(e.Name()) {
			continue
		}
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		if flock(fh.Fd(), syscall.LOCK_EX) != nil {
			fh.Close() // a live process's directory
			continue
		}
		dead = append(dead, p)
		unlock = append(unlock, func() { fh.Close() })
	}
	return dead, unlock
}

// processExists reports whether the process a temp directory's name
// starts with (PID.random, see newProcTempDir) exists.
func processExists(name string) bool {
	pidText, _, ok := strings.Cut(name, ".")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// ioReason is what an OS error says without the path it names: the data
// directory's location is the server's business, never the caller's. The
// full error stays in the wrapped cause for logs.
func ioReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Syscall + ": " + se.Err.Error()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "input/output error"
}
