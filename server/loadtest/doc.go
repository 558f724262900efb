// Package loadtest holds whole-server tests that need more than one
// request at a time: the soak test of issue 11 (hostile and honest
// traffic against one server for minutes) and the side-by-side benchmark
// of issue 17 (the format cases through HTTP against the Node stack in
// ../shared/peers). Both run a real server on 127.0.0.1 with every
// operation area and the sandbox worker pool; the test binary serves as
// the worker executable (it imports runtime/worker).
package loadtest
