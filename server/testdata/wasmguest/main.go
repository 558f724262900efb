//go:build wasip1

// Command wasmguest is the module the server's tests run through
// POST /api/run: it logs, reads a text file and writes one through the host
// ABI (so that its host calls show in the run feed), and answers with what
// it read. Input {"read": NAME, "write": NAME, "text": TEXT}; "fail": CODE
// makes it end with a host error.
package main

import (
	"fmt"
	"os"

	"github.com/metaclaw/metaclaw/bindings/wasm/guest"
)

type input struct {
	Read  string `json:"read"`
	Write string `json:"write"`
	Text  string `json:"text"`
	Fail  string `json:"fail"`
}

type output struct {
	Greeting   string `json:"greeting"`
	Content    string `json:"content,omitempty"`
	TotalLines int64  `json:"total_lines,omitempty"`
	Wrote      string `json:"wrote,omitempty"`
}

func main() {
	guest.Run(func(in input) (output, error) {
		fmt.Fprintln(os.Stderr, "hello from wasm")
		out := output{Greeting: "hi " + in.Text}
		if in.Fail != "" {
			_, err := guest.Files.Info(in.Fail)
			return out, err
		}
		if in.Read != "" {
			t, err := guest.Files.ReadText(in.Read, nil)
			if err != nil {
				return out, err
			}
			out.Content, out.TotalLines = t.Content, t.TotalLines
		}
		if in.Write != "" {
			f, err := guest.Files.Create(in.Write, &guest.FilesCreateOptions{Content: guest.Ptr(in.Text), Overwrite: guest.Ptr(true)})
			if err != nil {
				return out, err
			}
			out.Wrote = f.Name
		}
		return out, nil
	})
}
