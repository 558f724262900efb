//go:build unix

package wasm_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the test process has used, user and system:
// what a run costs whatever else the machine is doing.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
