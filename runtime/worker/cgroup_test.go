package worker_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/runtime/worker"
)

// ownMemoryCgroupDir is this process's cgroup v1 memory directory, when
// that controller is mounted at the usual place and writable.
func ownMemoryCgroupDir(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip("no /proc/self/cgroup")
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ",memory,") {
			dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			probe := filepath.Join(dir, "metaclaw-probe-"+strconv.Itoa(os.Getpid()))
			if err := os.Mkdir(probe, 0o755); err != nil {
				t.Skipf("the cgroup v1 memory controller is not writable here: %v", err)
			}
			os.Remove(probe)
			return dir
		}
	}
	t.Skip("no cgroup v1 memory controller")
	return ""
}

// A pool cleans up after a host that was killed: the cgroup directories of
// a pool whose process is gone are removed, a live one's are left.
func TestStaleCgroupsAreSwept(t *testing.T) {
	parent := ownMemoryCgroupDir(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, "metaclaw-"+strconv.Itoa(gone.Process.Pid))
	for _, d := range []string{stale, filepath.Join(stale, "w123")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(stale)
	defer os.Remove(filepath.Join(stale, "w123"))
	// The directory of a pool whose process runs (this test's parent).
	live := filepath.Join(parent, "metaclaw-"+strconv.Itoa(os.Getppid()))
	if err := os.Mkdir(live, 0o755); err != nil {
		t.Skipf("cannot stand in for a live pool: %v", err)
	}
	defer os.Remove(live)

	newPool(t, worker.Options{Size: 1})
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the dead pool's cgroup %s is still there (%v)", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the live pool's cgroup was removed: %v", err)
	}
}
