package image

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// TestNumbersOutOfRange (issue 11): every numeric argument of every image
// operation has a minimum and a maximum, and a value beyond them — as a
// Go integer, a float, or a JSON literal past int64 — is VALIDATION_FAILED
// naming the argument, never wrapped into range (libvips takes C ints, so
// a wrapped left of 2^32+10 would crop at 10). Nothing changes.
func TestNumbersOutOfRange(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"photo.jpg", "logo.png"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		e.upload(name, data)
	}
	before := e.snapshot()
	huge := []any{int64(1) << 40, int64(math.MaxInt64), json.Number("1e19"), json.Number("18446744073709551617"),
		-(int64(1) << 40), 1e300, -1e300, json.Number("-9223372036854775809"), int64(1)<<32 + 10}
	checked := 0
	call := func(tool, arg string, args map[string]any) {
		t.Helper()
		_, err := e.tool(tool, args)
		if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), arg) {
			t.Errorf("%s with %s out of range (%v): %v", tool, arg, args, err)
		}
		checked++
	}
	base := func(op *hostapi.Op) map[string]any {
		args := map[string]any{}
		for k, x := range op.Examples[0].Args {
			args[k] = x
		}
		return args
	}
	for _, op := range e.h.Registry.Ops() {
		for _, p := range op.Params {
			if !numeric(p.Schema) {
				continue
			}
			bounded(t, op.Tool+"."+p.Name, p.Schema)
			for _, v := range huge {
				args := base(op)
				args[p.Name] = v
				call(op.Tool, p.Name, args)
			}
		}
	}
	// The overlays' positions are numbers inside objects.
	items := e.h.Registry.ByTool("image_composite").InputSchema()["properties"].(hostapi.Schema)["overlays"].(hostapi.Schema)["items"].(hostapi.Schema)
	for _, key := range []string{"left", "top", "opacity"} {
		bounded(t, "image_composite.overlays."+key, items["properties"].(hostapi.Schema)[key].(hostapi.Schema))
		for _, v := range huge {
			overlay := map[string]any{"ref": "logo.png", key: v}
			call("image_composite", key, map[string]any{"id": "photo.jpg", "overlays": []any{overlay}, "output": "c.jpg"})
		}
	}
	if checked == 0 {
		t.Fatal("no numeric argument was checked")
	}
	if after := e.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("files changed:\n%v\n%v", before, after)
	}
}

// numeric reports whether a schema's type is or includes integer or number.
func numeric(s hostapi.Schema) bool {
	switch t := s["type"].(type) {
	case string:
		return t == "integer" || t == "number"
	case []any:
		for _, x := range t {
			if x == "integer" || x == "number" {
				return true
			}
		}
	}
	return false
}

// bounded fails t unless s has a minimum and a maximum.
func bounded(t *testing.T, what string, s hostapi.Schema) {
	t.Helper()
	_, min := s["minimum"]
	_, xmin := s["exclusiveMinimum"]
	if _, max := s["maximum"]; !max || !(min || xmin) {
		t.Errorf("%s is not bounded on both sides: %v", what, s)
	}
}
