package table

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Every DuckDB instance lives in an SQL worker: this binary started again
// in worker mode (workerproc.go). The host itself never opens DuckDB, for
// three reasons measured on DuckDB 1.5.5 with memory_limit = 488 MiB:
//
//   - memory_limit covers DuckDB's buffer manager (tables, hash tables,
//     sorts, string_agg) but not the vectors scalar functions build:
//     repeat('x', 2e9), lpad, printf('%2000000000d'), format('{:>2e9}')
//     each held ~2 GB, len(range(0, 4e8)) grew past 13 GB;
//   - DuckDB checks for interrupts between vectors, so those functions
//     ignore an interrupt for as long as they run (repeat: 60–120 s), and
//     so did the planner on a 114,688-expression SELECT (an xlsx with
//     cells A1 and XFD1048576);
//   - after a failed recursive query or string_agg, 260–570 MB stayed
//     resident for good.
//
// A worker process fixes all three with the kernel: RLIMIT_DATA caps its
// memory (DuckDB then fails the allocation with an Out of Memory Error,
// checked for each of the functions above), a worker that has not
// answered shortly after the deadline is killed, and a worker that failed
// or grew is retired so its memory goes back to the system. The engine's
// whole memory is bounded by MaxWorkers × the worker limit.

// workerArg is the hidden first argument that starts this binary as an
// SQL worker.
const workerArg = "__table_sql_worker"

// workerConfig is what a worker is started with (its second argument).
type workerConfig struct {
	Threads      int   `json:"threads"`
	MemoryLimit  int64 `json:"memoryLimit"`
	DataHeadroom int64 `json:"dataHeadroom"`
	MaxInstances int   `json:"maxInstances"`
}

// worker is one SQL worker process as the host sees it.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	frames chan response // answers, read by readLoop
	dead   chan struct{} // closed when the process has exited and is reaped
	stderr *tailBuffer
	ready  workerReady

	// Guarded by workerPool.mu.
	key   string   // the tables of the last request, for affinity
	drops []string // databases to close before the next request
	used  time.Time
	busy  bool
}

type workerPool struct {
	e       *engine
	command []string

	mu      sync.Mutex
	all     map[*worker]bool
	leaving map[*worker]bool // retired, not yet reaped: close waits for them too
	idle    []*worker        // most recently used last
	pending int              // workers being started
	freed   chan struct{}
	closed  bool
	nextID  uint64
	janitor chan struct{}
}

func newWorkerPool(e *engine) *workerPool {
	return &workerPool{e: e, all: map[*worker]bool{}, leaving: map[*worker]bool{}, freed: make(chan struct{}), janitor: make(chan struct{}, 1)}
}

// errWorkerGone is returned when a worker exits in the middle of a call.
var errWorkerGone = errors.New("the SQL worker stopped")

// call runs op with args on a worker and decodes its result into out.
// key names the tables the op touches, so that a worker that has them
// open is preferred. mapped, when set, receives an ingest's map as soon as
// the worker knows it. The operation is bounded by ctx: the worker stops
// at its deadline or when ctx is cancelled, and is killed KillAfter later
// if it has not.
func (p *workerPool) call(ctx context.Context, key, op string, args any, mapped func(*tableMeta), out any) error {
	w, err := p.acquire(ctx, key)
	if err != nil {
		return err
	}
	return p.do(ctx, w, op, args, mapped, out)
}

// do runs one request on w, which the caller has acquired; w is released
// (or retired) before do returns.
func (p *workerPool) do(ctx context.Context, w *worker, op string, args any, mapped func(*tableMeta), out any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		p.release(w, false)
		return apierr.Wrap(apierr.Internal, err, "encoding the SQL request failed: %v", err)
	}
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	drops := w.drops
	w.drops = nil
	p.mu.Unlock()
	req := request{ID: id, Op: op, Drop: drops, Args: raw}
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMs = max(1, time.Until(dl).Milliseconds())
	}
	if err := writeFrame(w.stdin, req); err != nil {
		p.retire(w, true)
		return apierr.Wrap(apierr.ToolWorkerUnavailable, err, "the SQL engine could not be reached; try again")
	}
	var kill <-chan time.Time
	done := ctx.Done()
	for {
		select {
		case r := <-w.frames:
			if r.ID != id {
				continue
			}
			if r.Mapped != nil {
				if mapped != nil {
					mapped(r.Mapped)
				}
				continue
			}
			retire := r.Usage != nil && r.Usage.RSS > w.ready.Usage.RSS+p.e.opts.RecycleAbove
			if r.Error != nil {
				switch r.Error.Code {
				case apierr.Timeout, apierr.ResourceExhausted, apierr.Internal:
					retire = true // start afresh: its memory may be fragmented or held
				}
				p.release(w, retire)
				if ctx.Err() != nil {
					return ctxError(ctx)
				}
				return r.Error
			}
			p.release(w, retire)
			if out == nil {
				return nil
			}
			if err := decodeExact(r.Result, out); err != nil {
				return apierr.Wrap(apierr.Internal, err, "decoding the SQL result failed: %v", err)
			}
			return nil
		case <-w.dead:
			p.forgetWorker(w)
			if ctx.Err() != nil {
				return ctxError(ctx)
			}
			return w.crashError()
		case <-done:
			done = nil
			writeFrame(w.stdin, request{ID: id, Cancel: true})
			kill = time.After(p.e.opts.KillAfter)
		case <-kill:
			// DuckDB did not reach an interrupt check in time (a huge
			// scalar function, the planner): end the process.
			p.retire(w, true)
			<-w.dead
			return ctxError(ctx)
		}
	}
}

// ctxError is the coded error of a call whose context ended.
func ctxError(ctx context.Context) error {
	switch {
	case errors.Is(context.Cause(ctx), errEngineClosed):
		return apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down; the call was stopped")
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return apierr.Wrap(apierr.Timeout, ctx.Err(), "the time limit ran out and the SQL work was stopped; add filters, aggregate, or LIMIT the result (a join without a join condition multiplies row counts), or allow the run more time")
	}
	return apierr.Wrap(apierr.Timeout, ctx.Err(), "the call was cancelled and its SQL work stopped")
}

var errEngineClosed = errors.New("the table engine is shutting down")

// acquire returns an idle worker (preferring one that served key last),
// starts one when fewer than MaxWorkers run, or waits for one to be freed.
func (p *workerPool) acquire(ctx context.Context, key string) (*worker, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down")
		}
		if n := len(p.idle); n > 0 {
			pick := n - 1
			for i := n - 1; i >= 0; i-- {
				if p.idle[i].key == key {
					pick = i
					break
				}
			}
			w := p.idle[pick]
			p.idle = append(p.idle[:pick], p.idle[pick+1:]...)
			w.busy, w.key = true, key
			p.mu.Unlock()
			return w, nil
		}
		if len(p.all)+p.pending < p.e.opts.MaxWorkers {
			p.pending++
			p.mu.Unlock()
			w, err := p.spawn(ctx)
			p.mu.Lock()
			p.pending--
			if err != nil {
				p.signalLocked()
				p.mu.Unlock()
				return nil, err
			}
			if p.closed {
				p.mu.Unlock()
				w.kill()
				<-w.dead
				return nil, apierr.New(apierr.ToolWorkerUnavailable, "the table engine is shutting down")
			}
			p.all[w] = true
			w.busy, w.key = true, key
			p.mu.Unlock()
			return w, nil
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), errEngineClosed) {
				return nil, ctxError(ctx)
			}
			return nil, apierr.Wrap(apierr.Busy, ctx.Err(), "all %d SQL workers stayed busy with other table calls until the time limit; try again in a moment", p.e.opts.MaxWorkers)
		}
	}
}

// signalLocked wakes everyone waiting for a worker.
func (p *workerPool) signalLocked() {
	close(p.freed)
	p.freed = make(chan struct{})
}

// release returns w to the idle list, or ends it when retire is set.
func (p *workerPool) release(w *worker, retire bool) {
	if retire {
		p.retire(w, false)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.busy, w.used = false, time.Now()
	if p.closed || !p.all[w] {
		go w.kill()
		return
	}
	p.idle = append(p.idle, w)
	p.signalLocked()
}

// retire ends w: gracefully (closing its stdin, which it answers by
// exiting) or, with now set, by killing it.
func (p *workerPool) retire(w *worker, now bool) {
	p.forgetWorker(w)
	if now {
		w.kill()
		return
	}
	w.stdin.Close()
	go func() {
		select {
		case <-w.dead:
		case <-time.After(2 * time.Second):
			w.kill()
		}
	}()
}

func (p *workerPool) forgetWorker(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.all[w] {
		return
	}
	delete(p.all, w)
	p.leaving[w] = true
	go func() {
		<-w.dead
		p.mu.Lock()
		delete(p.leaving, w)
		p.mu.Unlock()
	}()
	for i, x := range p.idle {
		if x == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	p.signalLocked()
}

// drop tells every worker to close its instances of path before its next
// request; idle workers are told by the janitor at once.
func (p *workerPool) drop(path string) {
	p.mu.Lock()
	for w := range p.all {
		w.drops = append(w.drops, path)
	}
	p.mu.Unlock()
	select {
	case p.janitor <- struct{}{}:
	default:
	}
}

// runJanitor delivers pending drops to idle workers and retires workers
// beyond the first that have been idle for IdleTimeout.
func (p *workerPool) runJanitor(ctx context.Context) {
	tick := time.NewTicker(max(p.e.opts.IdleTimeout/4, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-p.janitor:
		}
		p.mu.Lock()
		var flush, old []*worker
		for i := 0; i < len(p.idle); i++ {
			w := p.idle[i]
			switch {
			case len(p.idle) > 1 && time.Since(w.used) > p.e.opts.IdleTimeout:
				old = append(old, w)
			case len(w.drops) > 0:
				flush = append(flush, w)
			default:
				continue
			}
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			w.busy = true
			i--
		}
		p.mu.Unlock()
		for _, w := range old {
			p.retire(w, false)
		}
		for _, w := range flush {
			go func(w *worker) {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				p.do(ctx, w, opEvict, struct{}{}, nil, nil)
			}(w)
		}
	}
}

// closeAll kills every worker; calls in flight end with
// TOOL_WORKER_UNAVAILABLE.
func (p *workerPool) closeAll() {
	p.mu.Lock()
	p.closed = true
	ws := make([]*worker, 0, len(p.all)+len(p.leaving))
	for w := range p.all {
		ws = append(ws, w)
	}
	for w := range p.leaving {
		ws = append(ws, w)
	}
	p.all = map[*worker]bool{}
	p.idle = nil
	p.signalLocked()
	p.mu.Unlock()
	for _, w := range ws {
		w.kill()
	}
	for _, w := range ws {
		<-w.dead
	}
}

// pids lists the running workers' process ids (for tests and metrics).
func (p *workerPool) pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for w := range p.all {
		out = append(out, w.cmd.Process.Pid)
	}
	return out
}

// spawn starts a worker and waits for its ready frame.
func (p *workerPool) spawn(ctx context.Context) (*worker, error) {
	cmdline := p.command
	if len(cmdline) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
		}
		cmdline = []string{exe}
	}
	o := p.e.opts
	cfg, _ := json.Marshal(workerConfig{Threads: o.Threads, MemoryLimit: o.MemoryLimit, DataHeadroom: o.DataHeadroom, MaxInstances: o.MaxInstances})
	cmd := exec.Command(cmdline[0], append(append(cmdline[1:len(cmdline):len(cmdline)], workerArg), string(cfg))...)
	// Nothing from the host's environment (tokens, paths) reaches DuckDB.
	cmd.Env = []string{"HOME=/nonexistent", "TMPDIR=" + os.TempDir()}
	cmd.Dir = "/"
	w := &worker{cmd: cmd, frames: make(chan response, 4), dead: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = w.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	w.stdin = stdin
	if err := cmd.Start(); err != nil {
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	go w.readLoop(bufio.NewReaderSize(stdout, 64<<10))
	timer := time.NewTimer(o.SpawnTimeout)
	defer timer.Stop()
	select {
	case r := <-w.frames:
		if r.Ready == nil {
			w.kill()
			return nil, apierr.New(apierr.ToolWorkerUnavailable, "the SQL engine started wrongly (no ready message)")
		}
		w.ready = *r.Ready
		w.used = time.Now()
		return w, nil
	case <-w.dead:
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "the SQL engine could not start: %s", w.stderr.String())
	case <-timer.C:
		w.kill()
		return nil, apierr.New(apierr.ToolWorkerUnavailable, "the SQL engine did not start within %s", o.SpawnTimeout)
	case <-ctx.Done():
		w.kill()
		return nil, ctxError(ctx)
	}
}

// readLoop hands the worker's frames to call until the process ends,
// then reaps it.
func (w *worker) readLoop(r *bufio.Reader) {
	defer func() {
		w.cmd.Wait()
		close(w.dead)
	}()
	for {
		var resp response
		if err := readFrame(r, &resp); err != nil {
			w.cmd.Process.Kill()
			return
		}
		select {
		case w.frames <- resp:
		case <-time.After(time.Minute):
			// Nobody listens (a call that gave up); drop the frame.
		}
	}
}

func (w *worker) kill() {
	w.cmd.Process.Kill()
}

// crashError describes a worker that exited in the middle of a call.
func (w *worker) crashError() error {
	tail := w.stderr.String()
	low := strings.ToLower(tail)
	if strings.Contains(low, "out of memory") || strings.Contains(low, "bad_alloc") || strings.Contains(low, "cannot allocate memory") {
		return apierr.New(apierr.ResourceExhausted, "the SQL work needed more memory than the table engine allows and was stopped; aggregate or filter before joining or sorting, or ask for fewer rows")
	}
	state := "exited"
	if w.cmd.ProcessState != nil {
		state = w.cmd.ProcessState.String()
	}
	return apierr.Wrap(apierr.Internal, errWorkerGone, "the SQL engine stopped unexpectedly (%s); the call was not completed, try again", state)
}

// tailBuffer keeps the last max bytes written to it (a worker's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

func (w *worker) String() string { return fmt.Sprintf("sql worker %d", w.cmd.Process.Pid) }
