package textenc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/textenc"
)

// Reading a Windows-1252 file as UTF-8, then writing an edit back in the
// file's own encoding — or learning that the edit needs another one.
func Example() {
	body := []byte("name;city\nMu\xf1oz;M\xe1laga\n") // Windows-1252 bytes
	enc, err := textenc.Detect(context.Background(), strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	text, _ := io.ReadAll(enc.NewReader(strings.NewReader(string(body))))
	fmt.Printf("%s: %q\n", enc, text)

	edited, err := enc.Encode("Müller;Köln\n")
	fmt.Printf("% x %v\n", edited, err)

	_, err = enc.Encode("田中;東京\n")
	var ue *textenc.UnrepresentableError
	if errors.As(err, &ue) {
		fmt.Printf("%q at byte %d: write UTF-8 instead\n", ue.Rune, ue.Offset)
	}
	// Output:
	// windows-1252: "name;city\nMuñoz;Málaga\n"
	// 4d fc 6c 6c 65 72 3b 4b f6 6c 6e 0a <nil>
	// '田' at byte 0: write UTF-8 instead
}
