package table

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// This file is the SQL worker process (see worker.go for why it exists).
// Any binary that links this package serves as a worker: started with
// workerArg as its first argument, the process turns into a worker inside
// this package's init and never returns to main. It opens nothing but the
// paths its requests name, holds no store, token or socket, and ends when
// its stdin closes (the host went away or retired it).

func init() {
	if len(os.Args) > 2 && os.Args[1] == workerArg {
		os.Exit(workerMain(os.Args[2]))
	}
}

func workerMain(config string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "sql worker: bad configuration: %v\n", err)
		return 2
	}
	// The kernel holds the worker to its budget: everything DuckDB, Go and
	// excelize allocate from here on counts against RLIMIT_DATA, and an
	// allocation past it fails (DuckDB reports an Out of Memory Error).
	usage := readUsage()
	limit := usage.VmData + cfg.MemoryLimit + cfg.DataHeadroom
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}); err != nil {
		fmt.Fprintf(os.Stderr, "sql worker: cannot limit memory: %v\n", err)
		return 2
	}
	// Keep Go's own heap (results, excelize) well inside the headroom, and
	// give memory back soon after a large result is sent.
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(cfg.DataHeadroom / 2)

	var outMu sync.Mutex
	send := func(r response) {
		outMu.Lock()
		defer outMu.Unlock()
		if err := writeFrame(os.Stdout, r); err != nil {
			os.Exit(0) // the host is gone
		}
	}
	send(response{Ready: &workerReady{PID: os.Getpid(), DataLimit: limit, Usage: usage}})

	d := &duck{cfg: cfg, pool: newPool(cfg)}
	type job struct {
		req    request
		ctx    context.Context
		cancel context.CancelFunc
	}
	jobs := make(chan job, 1)
	var curMu sync.Mutex
	var cur *job
	go func() {
		in := bufio.NewReaderSize(os.Stdin, 64<<10)
		for {
			var r request
			if err := readFrame(in, &r); err != nil {
				os.Exit(0) // stdin closed: retired, or the host died
			}
			if r.Cancel {
				curMu.Lock()
				if cur != nil && cur.req.ID == r.ID {
					cur.cancel()
				}
				curMu.Unlock()
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			if r.TimeoutMs > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), time.Duration(r.TimeoutMs)*time.Millisecond)
			}
			j := job{req: r, ctx: ctx, cancel: cancel}
			curMu.Lock()
			cur = &j
			curMu.Unlock()
			jobs <- j
		}
	}()
	for j := range jobs {
		res, err := d.serve(j.ctx, j.req, func(m *tableMeta) { send(response{ID: j.req.ID, Mapped: m}) })
		if err != nil && j.ctx.Err() != nil && apierr.CodeOf(err) != apierr.Timeout {
			err = sqlError(j.ctx, err)
		}
		j.cancel()
		resp := response{ID: j.req.ID}
		if err != nil {
			resp.Error = apierr.Of(err)
		} else if resp.Result, err = json.Marshal(res); err != nil {
			resp.Error = apierr.New(apierr.Internal, "encoding the result failed: %v", err)
		}
		resp.Usage = &workerResources{RSS: readRSS()}
		send(resp)
	}
	return 0
}

// pageSize is the unit of /proc/self/statm.
var pageSize = int64(os.Getpagesize())

// readRSS reads this process's resident bytes from /proc/self/statm (one
// short line; it is read after every request).
func readRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * pageSize
}

// readUsage reads this process's VmRSS and VmData.
func readUsage() workerResources {
	return usageOf("/proc/self/status")
}

func usageOf(statusPath string) workerResources {
	var u workerResources
	b, err := os.ReadFile(statusPath)
	if err != nil {
		return u
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.RSS = kb << 10
		case "VmData:":
			u.VmData = kb << 10
		}
	}
	return u
}
