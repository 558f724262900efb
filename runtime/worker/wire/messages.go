package wire

import "time"

// Init is the parent's first frame: how the worker confines itself before
// it runs anything.
type Init struct {
	ParentPID int
	// Chroot makes the worker chroot into its (empty) working directory.
	Chroot bool
	// UID and GID, when ≥ 0, are the unprivileged ids the worker switches
	// to after chroot.
	UID, GID int
	// MaxStack bounds each goroutine's stack (debug.SetMaxStack), so that
	// recursion inside a native built-in fails fast.
	MaxStack int
	// MaxProcs caps the worker's GOMAXPROCS.
	MaxProcs int
	// HeapReserve is the heap the worker maps untouched, with huge pages
	// advised, before it answers (0: none).
	HeapReserve int64
}

// Marshal encodes m.
func (m *Init) Marshal() []byte {
	var e Enc
	e.Int(int64(m.ParentPID))
	e.Bool(m.Chroot)
	e.Int(int64(m.UID))
	e.Int(int64(m.GID))
	e.Int(int64(m.MaxStack))
	e.Int(int64(m.MaxProcs))
	e.Int(m.HeapReserve)
	return e.B
}

// Unmarshal decodes m.
func (m *Init) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.ParentPID = int(d.Int())
	m.Chroot = d.Bool()
	m.UID = int(d.Int())
	m.GID = int(d.Int())
	m.MaxStack = int(d.Int())
	m.MaxProcs = int(d.Int())
	m.HeapReserve = d.Int()
	return d.Err
}

// Hello is the worker's answer to Init: what confinement it applied.
type Hello struct {
	PID int
	// Confined lists what applied ("chroot", "uid 65534", "no_new_privs").
	Confined string
	// Problem is set when a confinement step that was asked for failed.
	Problem string
}

// Marshal encodes m.
func (m *Hello) Marshal() []byte {
	var e Enc
	e.Int(int64(m.PID))
	e.String(m.Confined)
	e.String(m.Problem)
	return e.B
}

// Unmarshal decodes m.
func (m *Hello) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.PID = int(d.Int())
	m.Confined = d.String()
	m.Problem = d.String()
	return d.Err
}

// Plan carries the sandbox API (a stubs.Spec as JSON) and its version.
type Plan struct {
	Version uint64
	Spec    []byte
}

// Marshal encodes m.
func (m *Plan) Marshal() []byte {
	var e Enc
	e.Uint(m.Version)
	e.Bytes(m.Spec)
	return e.B
}

// Unmarshal decodes m.
func (m *Plan) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.Version = d.Uint()
	m.Spec = d.Bytes()
	return d.Err
}

// Run starts a script.
type Run struct {
	ID          uint64
	PlanVersion uint64
	Name        string
	Code        string
	Input       []byte
	Session     string
	Timeout     time.Duration
	// TimeoutMessage is what the run's TIMEOUT error says.
	TimeoutMessage string
	MemoryBytes    int64
	LogBytes       int
	ResultBytes    int
	MaxCalls       int
	MaxArgBytes    int
	// Grace is how long a stopped VM may take to unwind before the worker
	// reports the run itself and exits.
	Grace time.Duration
}

// Marshal encodes m.
func (m *Run) Marshal() []byte {
	e := Enc{B: make([]byte, 0, 64+len(m.Code)+len(m.Input))}
	e.Uint(m.ID)
	e.Uint(m.PlanVersion)
	e.String(m.Name)
	e.String(m.Code)
	e.Bytes(m.Input)
	e.String(m.Session)
	e.Int(int64(m.Timeout))
	e.String(m.TimeoutMessage)
	e.Int(m.MemoryBytes)
	e.Int(int64(m.LogBytes))
	e.Int(int64(m.ResultBytes))
	e.Int(int64(m.MaxCalls))
	e.Int(int64(m.MaxArgBytes))
	e.Int(int64(m.Grace))
	return e.B
}

// Unmarshal decodes m.
func (m *Run) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.ID = d.Uint()
	m.PlanVersion = d.Uint()
	m.Name = d.String()
	m.Code = d.String()
	m.Input = d.Bytes()
	m.Session = d.String()
	m.Timeout = time.Duration(d.Int())
	m.TimeoutMessage = d.String()
	m.MemoryBytes = d.Int()
	m.LogBytes = int(d.Int())
	m.ResultBytes = int(d.Int())
	m.MaxCalls = int(d.Int())
	m.MaxArgBytes = int(d.Int())
	m.Grace = time.Duration(d.Int())
	return d.Err
}

// Call is a host call a script made.
type Call struct {
	Run    uint64
	ID     uint64
	Method int
	Args   []byte
}

// Marshal encodes m.
func (m *Call) Marshal() []byte {
	e := Enc{B: make([]byte, 0, 24+len(m.Args))}
	e.Uint(m.Run)
	e.Uint(m.ID)
	e.Uint(uint64(m.Method))
	e.Bytes(m.Args)
	return e.B
}

// Unmarshal decodes m.
func (m *Call) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.Run = d.Uint()
	m.ID = d.Uint()
	m.Method = int(d.Uint())
	m.Args = d.Bytes()
	return d.Err
}

// Reply ends a host call: its result as JSON, or an error code and message.
type Reply struct {
	Run     uint64
	ID      uint64
	Code    string // "" when the call succeeded
	Message string
	Result  []byte
	// Polling says the parent polls for the worker's next frame for a
	// moment (wire.SpinWindow) instead of sleeping: a next call made at
	// once is answered without a wake-up on either side, so the worker
	// polls for that answer too.
	Polling bool
}

// Marshal encodes m.
func (m *Reply) Marshal() []byte {
	e := Enc{B: make([]byte, 0, 24+len(m.Result)+len(m.Message))}
	e.Uint(m.Run)
	e.Uint(m.ID)
	e.String(m.Code)
	e.String(m.Message)
	e.Bytes(m.Result)
	e.Bool(m.Polling)
	return e.B
}

// Unmarshal decodes m.
func (m *Reply) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.Run = d.Uint()
	m.ID = d.Uint()
	m.Code = d.String()
	m.Message = d.String()
	m.Result = d.Bytes()
	m.Polling = d.Bool()
	return d.Err
}

// Stop ends a run early (parent → worker: Cancel) or says why the worker
// is ending one on its own (worker → parent: Stopping).
type Stop struct {
	Run     uint64
	Code    string
	Message string
}

// Marshal encodes m.
func (m *Stop) Marshal() []byte {
	var e Enc
	e.Uint(m.Run)
	e.String(m.Code)
	e.String(m.Message)
	return e.B
}

// Unmarshal decodes m.
func (m *Stop) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.Run = d.Uint()
	m.Code = d.String()
	m.Message = d.String()
	return d.Err
}

// Log is one console entry.
type Log struct {
	Level   string
	Message string
}

// Logs is a batch of a run's console entries.
type Logs struct {
	Run  uint64
	Logs []Log
}

// Marshal encodes m.
func (m *Logs) Marshal() []byte {
	n := 16
	for _, l := range m.Logs {
		n += len(l.Level) + len(l.Message) + 4
	}
	e := Enc{B: make([]byte, 0, n)}
	e.Uint(m.Run)
	encodeLogs(&e, m.Logs)
	return e.B
}

// Unmarshal decodes m.
func (m *Logs) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.Run = d.Uint()
	m.Logs = decodeLogs(&d)
	return d.Err
}

func encodeLogs(e *Enc, logs []Log) {
	e.Uint(uint64(len(logs)))
	for _, l := range logs {
		e.String(l.Level)
		e.String(l.Message)
	}
}

func decodeLogs(d *Dec) []Log {
	n := d.Uint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.fail()
	}
	if d.Err != nil || n == 0 {
		return nil
	}
	logs := make([]Log, 0, n)
	for i := uint64(0); i < n && d.Err == nil; i++ {
		logs = append(logs, Log{Level: d.String(), Message: d.String()})
	}
	return logs
}

// Result ends a run.
type Result struct {
	Run     uint64
	OK      bool
	Result  []byte
	Code    string
	Message string
	Stack   string
	Logs    []Log
	// HeapBytes is the worker's heap after the run, for the pool's
	// decision to recycle it.
	HeapBytes uint64
	// Exiting says the worker exits after this frame (its VM was stuck).
	Exiting bool
}

// Marshal encodes m.
func (m *Result) Marshal() []byte {
	n := 64 + len(m.Result) + len(m.Message) + len(m.Stack)
	for _, l := range m.Logs {
		n += len(l.Level) + len(l.Message) + 4
	}
	e := Enc{B: make([]byte, 0, n)}
	e.Uint(m.Run)
	e.Bool(m.OK)
	e.Bytes(m.Result)
	e.String(m.Code)
	e.String(m.Message)
	e.String(m.Stack)
	encodeLogs(&e, m.Logs)
	e.Uint(m.HeapBytes)
	e.Bool(m.Exiting)
	return e.B
}

// Unmarshal decodes m.
func (m *Result) Unmarshal(b []byte) error {
	d := Dec{B: b}
	m.Run = d.Uint()
	m.OK = d.Bool()
	m.Result = d.Bytes()
	m.Code = d.String()
	m.Message = d.String()
	m.Stack = d.String()
	m.Logs = decodeLogs(&d)
	m.HeapBytes = d.Uint()
	m.Exiting = d.Bool()
	return d.Err
}
