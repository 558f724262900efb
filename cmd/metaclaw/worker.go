package main

// Importing the worker package makes this binary serve as its own sandbox
// worker: `metaclaw __worker` (started only by the worker pool, never by
// hand) becomes a worker process inside the package's init, before the
// host's other packages initialise and long before main runs. See
// runtime/worker/child.
import _ "github.com/metaclaw/metaclaw/runtime/worker/child"
