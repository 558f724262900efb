package worker_test

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/runtime/worker"
)

// usage is CPU time and thread switches used so far, by this process and
// by the pool's workers, so that benchmarks can report cost per operation
// whatever else the machine is doing.
type usage struct {
	hostCPU, workerCPU time.Duration
	hostSw, workerSw   int64
}

func measure(p *worker.Pool) usage {
	var u usage
	u.hostCPU, u.hostSw = procUsage(os.Getpid())
	for _, pid := range p.PIDs() {
		c, s := procUsage(pid)
		u.workerCPU += c
		u.workerSw += s
	}
	return u
}

func (u usage) sub(v usage) usage {
	return usage{u.hostCPU - v.hostCPU, u.workerCPU - v.workerCPU, u.hostSw - v.hostSw, u.workerSw - v.workerSw}
}

// procUsage reads a process's CPU time (all threads) and its threads'
// context switches from /proc.
func procUsage(pid int) (time.Duration, int64) {
	var cpu time.Duration
	var sw int64
	base := "/proc/" + strconv.Itoa(pid)
	if b, err := os.ReadFile(base + "/stat"); err == nil {
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 13 {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			cpu = time.Duration(ut+st) * 10 * time.Millisecond
		}
	}
	tasks, _ := os.ReadDir(base + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile(base + "/task/" + t.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sw += n
			} else if v, ok := strings.CutPrefix(line, "nonvoluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				sw += n
			}
		}
	}
	return cpu, sw
}
