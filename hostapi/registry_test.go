package hostapi

import (
	"context"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

type echoResult struct {
	TotalLines int            `json:"totalLines"`
	MimeType   string         `json:"mimeType"`
	Data       map[string]any `json:"data"`
}

func newTestHost(t *testing.T) *Host {
	t.Helper()
	h, err := NewHost(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.Registry.Add(Op{
		Name: "files.echo", Tool: "file_echo", Doc: "echo",
		Params: []Param{
			Ref(""),
			{Name: "start_line", Schema: Integer(1), Group: "options"},
			{Name: "end_line", Schema: Integer(1), Group: "options"},
		},
		Result: echoResult{},
		Handler: func(ctx context.Context, c *Call) (any, error) {
			n, _ := c.Args.Int("start_line")
			return echoResult{TotalLines: int(n), MimeType: c.Args.String("id"), Data: map[string]any{"keepThisKey": 1}}, nil
		},
	})
	return h
}

func TestCallToolProjectsSnakeCase(t *testing.T) {
	h := newTestHost(t)
	res, err := h.Registry.CallTool(context.Background(), h.Env("default", "s"), "file_echo", map[string]any{"id": "a.txt", "start_line": 3})
	if err != nil {
		t.Fatal(err)
	}
	m := res.(map[string]any)
	if m["total_lines"] != float64(3) || m["mime_type"] != "a.txt" {
		t.Fatalf("got %v", m)
	}
	if _, ok := m["data"].(map[string]any)["keepThisKey"]; !ok {
		t.Fatalf("map keys must not be renamed: %v", m)
	}
	if Project(res, CamelCase) == nil {
		t.Fatal("nil projection")
	}
}

func TestValidationNamesTheArgument(t *testing.T) {
	h := newTestHost(t)
	ctx := context.Background()
	env := h.Env("default", "s")
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, `id`},
		{map[string]any{"id": "a", "start_line": "x"}, `"start_line"`},
		{map[string]any{"id": "a", "start_line": 0}, `"start_line"`},
		{map[string]any{"id": "a", "bogus": 1}, `bogus`},
		{map[string]any{"id": 5}, `"id"`},
	}
	for _, c := range cases {
		_, err := h.Registry.CallTool(ctx, env, "file_echo", c.args)
		if apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Fatalf("%v: want VALIDATION_FAILED, got %v", c.args, err)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: error %q does not name %s", c.args, err, c.want)
		}
	}
	if _, err := h.Registry.CallTool(ctx, env, "nope", nil); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("unknown tool: %v", err)
	}
}

func TestNameConversions(t *testing.T) {
	for camel, snake := range map[string]string{"totalLines": "total_lines", "mimeType": "mime_type", "sha256": "sha256", "id": "id", "durationMs": "duration_ms"} {
		if got := SnakeName(camel); got != snake {
			t.Errorf("SnakeName(%s)=%s", camel, got)
		}
		if got := CamelName(snake); got != camel {
			t.Errorf("CamelName(%s)=%s", snake, got)
		}
	}
}
