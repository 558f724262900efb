//go:build wasip1

// Command probe is the Go guest the runtime's tests drive: its input picks
// what it does, so that one module (one build) covers the ABI, the SDK and
// the limits.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/bindings/wasm/guest"
)

type input struct {
	Mode string          `json:"mode"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
	Raw  string          `json:"raw"`
	ID   string          `json:"id"`
	N    int             `json:"n"`
	Text string          `json:"text"`
}

// called is one host call's outcome, as the tests compare it.
type called struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *guest.Error    `json:"error,omitempty"`
}

func call(op string, args []byte) called {
	res, err := guest.CallRaw(op, args)
	if err != nil {
		var e *guest.Error
		if !errors.As(err, &e) {
			e = &guest.Error{Code: "NOT_A_GUEST_ERROR", Message: err.Error()}
		}
		return called{Error: e}
	}
	return called{Result: res}
}

func main() {
	guest.Run(func(in input) (any, error) {
		switch in.Mode {
		case "echo":
			return in, nil
		case "call":
			return call(in.Op, in.Args), nil
		case "raw":
			return call(in.Op, []byte(in.Raw)), nil
		case "calls":
			// The same call n times: the host-call benchmark.
			var last called
			for i := 0; i < in.N; i++ {
				last = call(in.Op, in.Args)
			}
			return last, nil
		case "lines":
			return guest.Files.ReadText(in.ID, &guest.FilesReadTextOptions{StartLine: guest.Ptr(int64(1)), EndLine: guest.Ptr(int64(in.N))})
		case "typed":
			return typed(in.ID)
		case "fail":
			// A host error handed on keeps its code.
			_, err := guest.Files.Info(in.ID)
			return nil, fmt.Errorf("probe could not look at %s: %w", in.ID, err)
		case "panic":
			panic("boom from the probe")
		case "exit":
			fmt.Fprintln(os.Stderr, "about to exit")
			os.Exit(in.N)
		case "alloc":
			// Holds n MB in 1 MB pieces.
			var keep [][]byte
			for i := 0; i < in.N; i++ {
				b := make([]byte, 1<<20)
				b[i%len(b)] = 1
				keep = append(keep, b)
			}
			return len(keep), nil
		case "spin":
			x := 0
			for {
				x++
			}
		case "sleep":
			time.Sleep(time.Duration(in.N) * time.Millisecond)
			return "slept", nil
		case "stdout":
			// Writes n MB to stdout, then a result.
			chunk := []byte(strings.Repeat("x", 1<<20))
			for i := 0; i < in.N; i++ {
				os.Stdout.Write(chunk)
			}
			return nil, nil
		case "log":
			guest.Log(guest.LevelInfo, "info entry")
			guest.Log(guest.LevelWarn, "warn entry")
			guest.Log(guest.LevelError, "error entry")
			guest.Log(guest.LevelDebug, "debug entry")
			guest.Logf("formatted %d", 42)
			fmt.Fprintln(os.Stderr, "stderr line one")
			fmt.Fprint(os.Stderr, "stderr line two\nstderr without newline")
			return "logged", nil
		case "spam":
			// n MB of stderr: the log limit cuts it, the run carries on.
			line := strings.Repeat("y", 1023) + "\n"
			for i := 0; i < in.N*1024; i++ {
				os.Stderr.WriteString(line)
			}
			return "spammed", nil
		case "sandbox":
			return sandbox(), nil
		case "text":
			fmt.Print(in.Text)
			os.Exit(0)
		}
		return nil, &guest.Error{Code: guest.ValidationFailed, Message: "unknown mode " + in.Mode}
	})
}

// typed drives the generated helpers through a file's life.
func typed(name string) (any, error) {
	if _, err := guest.Files.Create(name, &guest.FilesCreateOptions{Content: guest.Ptr("alpha\nbeta\ngamma\n"), Overwrite: guest.Ptr(true)}); err != nil {
		return nil, err
	}
	if _, err := guest.Files.InsertLines(name, 1, "inserted"); err != nil {
		return nil, err
	}
	text, err := guest.Files.ReadText(name, nil)
	if err != nil {
		return nil, err
	}
	hits, err := guest.Files.SearchText(name, "^(a|g)", &guest.FilesSearchTextOptions{MaxMatches: guest.Ptr(int64(5))})
	if err != nil {
		return nil, err
	}
	count, err := guest.Files.LineCount(name)
	if err != nil {
		return nil, err
	}
	list, err := guest.Files.List(&guest.FilesListOptions{Pattern: guest.Ptr(name)})
	if err != nil {
		return nil, err
	}
	info, err := guest.Files.Info(name)
	if err != nil {
		return nil, err
	}
	_, missing := guest.Files.Info("no/such/file.txt")
	return map[string]any{
		"text": text.Content, "total": text.TotalLines, "hits": hits.Matches, "count": count,
		"listed": len(list.Files), "size": info.Size, "mime": info.MimeType,
		"missing_code": guest.CodeOf(missing),
		"missing_is":   errors.Is(missing, &guest.Error{Code: guest.NotFound}),
	}, nil
}

// sandbox reports what the module can see of the machine: nothing.
func sandbox() map[string]any {
	out := map[string]any{"args": os.Args, "env": os.Environ()}
	_, err := os.ReadDir("/")
	out["readdir"] = err != nil
	_, err = os.ReadFile("/etc/passwd")
	out["readfile"] = err != nil
	_, err = net.Dial("tcp", "127.0.0.1:80")
	out["dial"] = err != nil
	out["year"] = time.Now().Year()
	return out
}
