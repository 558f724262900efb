package worker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Isolation chooses how far workers are confined. The default, Auto,
// applies everything the machine permits and says once in the log what
// applied.
type Isolation int

const (
	// Auto: a new network namespace (and IPC namespace) when permitted —
	// directly as root, through a user namespace otherwise —, chroot into
	// an empty directory and an unprivileged uid when root, a per-worker
	// cgroup memory limit where the cgroup v1 memory controller is
	// writable, and RLIMIT_DATA always.
	Auto Isolation = iota
	// Minimal: only what needs no privilege: an empty environment and
	// working directory, no inherited descriptors, RLIMIT_DATA, the
	// parent-death signal and its own process group.
	Minimal
)

// nobody is the unprivileged uid and gid a root-started worker runs as.
const nobody = 65534

// confinement is what the pool applies to every worker.
type confinement struct {
	root       string // the empty directory workers start (and chroot) in
	cloneflags uintptr
	userns     bool // cloneflags include CLONE_NEWUSER
	chroot     bool
	uid, gid   int // -1: keep
	cgroups    *cgroupParent
}

// attempts lists the namespace setups to try in order.
func (c *confinement) attempts(iso Isolation) []confinement {
	base := *c
	base.cloneflags, base.userns = 0, false
	if iso == Minimal {
		base.chroot, base.uid, base.gid = false, -1, -1
		return []confinement{base}
	}
	var out []confinement
	if os.Geteuid() == 0 {
		root := base
		root.cloneflags = syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC
		root.chroot, root.uid, root.gid = true, nobody, nobody
		out = append(out, root)
		plain := base
		plain.chroot, plain.uid, plain.gid = true, nobody, nobody
		out = append(out, plain)
	} else {
		user := base
		user.cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC
		user.userns = true
		// Inside its own user namespace the worker is root there only:
		// it may chroot; it has no power over the host.
		user.chroot, user.uid, user.gid = true, -1, -1
		out = append(out, user)
	}
	none := base
	none.chroot, none.uid, none.gid = false, -1, -1
	return append(out, none)
}

// describe says in words what applies, for the log line at pool start.
func (c *confinement) describe(memory string) string {
	var parts []string
	if c.cloneflags&syscall.CLONE_NEWNET != 0 {
		parts = append(parts, "no network (own network namespace)")
	} else {
		parts = append(parts, "network NOT isolated (namespaces not permitted here)")
	}
	if c.chroot {
		parts = append(parts, "chroot into an empty directory")
	} else {
		parts = append(parts, "empty working directory (chroot not permitted)")
	}
	if c.uid >= 0 {
		parts = append(parts, "uid "+strconv.Itoa(c.uid))
	}
	parts = append(parts, memory)
	return strings.Join(parts, "; ")
}

// setRlimitData sets pid's RLIMIT_DATA (soft and hard).
func setRlimitData(pid int, bytes uint64) error {
	lim := unix.Rlimit{Cur: bytes, Max: bytes}
	return unix.Prlimit(pid, unix.RLIMIT_DATA, &lim, nil)
}

// newRoot makes the empty directory workers start in.
func newRoot() (string, error) {
	dir, err := os.MkdirTemp("", "metaclaw-sandbox-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// cgroupParent is this pool's directory in the cgroup v1 memory
// hierarchy; each worker gets a child directory with its own limit.
type cgroupParent struct {
	dir string
}

// cgroup is one worker's memory cgroup.
type cgroup struct {
	dir     string
	limit   int64
	failcnt kernelFile // memory.failcnt, read every few ms while a run lasts
	// fails is memory.failcnt as last seen: how often the worker's memory
	// had reached the limit by then.
	fails int64
}

// openCgroups creates the pool's cgroup directory below the process's own
// memory cgroup, when the cgroup v1 memory controller is mounted writable.
// (Under cgroup v2 a process cannot give its children their own memory
// limit without moving itself, so v2 machines rely on RLIMIT_DATA.)
func openCgroups() (*cgroupParent, error) {
	mount, err := memoryMount()
	if err != nil {
		return nil, err
	}
	own, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	sweepStale(filepath.Join(mount, own))
	dir := filepath.Join(mount, own, fmt.Sprintf("metaclaw-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	probe := filepath.Join(dir, "probe")
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		os.Remove(dir)
		return nil, err
	}
	err = os.WriteFile(filepath.Join(probe, "memory.limit_in_bytes"), []byte("67108864"), 0)
	os.Remove(probe)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &cgroupParent{dir: dir}, nil
}

// sweepStale removes the cgroup directories of pools whose process is gone
// (a host that was killed cannot remove its own): metaclaw-PID for a PID
// that no longer runs, with its workers' directories. A cgroup that still
// holds a process cannot be removed, so a live worker keeps its own.
func sweepStale(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := strings.CutPrefix(e.Name(), "metaclaw-")
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // that pool's host still runs
		}
		dir := filepath.Join(parent, e.Name())
		workers, _ := os.ReadDir(dir)
		for _, w := range workers {
			if w.IsDir() {
				os.Remove(filepath.Join(dir, w.Name()))
			}
		}
		os.Remove(dir)
	}
}

// memoryMount finds where the cgroup v1 memory controller is mounted.
func memoryMount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		if !hasOption(fields[sep+3], "memory") || !hasOption(fields[5], "rw") || fields[3] != "/" {
			continue
		}
		return fields[4], nil
	}
	return "", errors.New("no writable cgroup v1 memory controller is mounted")
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// ownMemoryCgroup is this process's path in the memory hierarchy.
func ownMemoryCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// 4:memory:/process_api/0c28…
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && hasOption(parts[1], "memory") {
			return parts[2], nil
		}
	}
	return "", errors.New("this process is in no cgroup v1 memory hierarchy")
}

// add creates a cgroup for worker pid with the given limit and moves it in.
func (p *cgroupParent) add(pid int, limit int64) (*cgroup, error) {
	dir := filepath.Join(p.dir, "w"+strconv.Itoa(pid))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cg := &cgroup{dir: dir}
	if err := cg.setLimit(limit); err != nil {
		os.Remove(dir)
		return nil, err
	}
	// Swap counts against the limit too, where swap accounting exists.
	os.WriteFile(filepath.Join(dir, "memory.swappiness"), []byte("0"), 0)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		os.Remove(dir)
		return nil, err
	}
	return cg, nil
}

// setLimit sets the hard memory limit, and the memory+swap limit to the
// same value where swap accounting exists (memsw may never be below the
// memory limit, so the order of the two writes depends on the direction).
func (cg *cgroup) setLimit(limit int64) error {
	if cg.limit == limit {
		return nil
	}
	v := []byte(strconv.FormatInt(limit, 10))
	mem := filepath.Join(cg.dir, "memory.limit_in_bytes")
	memsw := filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")
	writeSwap := func() {
		// Absent without swap accounting; nothing to do then.
		os.WriteFile(memsw, v, 0)
	}
	raising := cg.limit != 0 && limit > cg.limit
	if raising {
		writeSwap()
	}
	if err := os.WriteFile(mem, v, 0); err != nil {
		return err
	}
	if !raising {
		writeSwap()
	}
	cg.limit = limit
	return nil
}

// oomKilled reports whether the kernel's OOM killer acted in the cgroup
// (the oom_kill counter; on kernels without it, whether usage ever hit
// the limit).
func (cg *cgroup) oomKilled() bool {
	b, err := os.ReadFile(filepath.Join(cg.dir, "memory.oom_control"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strings.TrimSpace(n) != "0"
		}
	}
	fail, err := os.ReadFile(filepath.Join(cg.dir, "memory.failcnt"))
	return err == nil && strings.TrimSpace(string(fail)) != "0"
}

// failCount reads how often the worker's memory has reached the limit
// (-1 when it cannot be read).
func (cg *cgroup) failCount() int64 {
	b, err := cg.failcnt.read(filepath.Join(cg.dir, "memory.failcnt"))
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// atLimit reports whether the worker's memory has reached the limit since
// the last look. A cgroup v1 limit does not end a process at once: the
// kernel first reclaims what it can, which for a worker is its own code
// (the binary's file pages), and the worker crawls on re-reading them, for
// seconds on a busy machine, before the OOM killer acts. The pool asks
// this while a run lasts and ends the run itself.
func (cg *cgroup) atLimit() bool {
	n := cg.failCount()
	if n < 0 {
		return false
	}
	hit := n > cg.fails
	cg.fails = n
	return hit
}

// remove deletes the (empty) cgroup after its worker has exited.
func (cg *cgroup) remove() {
	cg.failcnt.close()
	os.Remove(cg.dir)
}

// kernelFile re-reads a small kernel file (procfs, cgroupfs) through one
// open descriptor: opening it was most of the cost of reading it, and the
// pool reads two such files every few milliseconds for each running
// worker. Reading at offset 0 makes the kernel generate it afresh.
type kernelFile struct {
	mu  sync.Mutex
	f   *os.File
	buf [256]byte
}

func (k *kernelFile) read(path string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.f == nil {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		k.f = f
	}
	n, err := k.f.ReadAt(k.buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return k.buf[:n], nil
}

func (k *kernelFile) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.f != nil {
		k.f.Close()
		k.f = nil
	}
}

// close removes the pool's cgroup directory.
func (p *cgroupParent) close() { os.Remove(p.dir) }
