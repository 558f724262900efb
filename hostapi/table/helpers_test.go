package table

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// testHost is a real host with the table operations registered.
type testHost struct {
	t   *testing.T
	h   *hostapi.Host
	e   *engine
	env *hostapi.Env
	dir string
}

func newTestHost(t *testing.T, mod ...func(*hostapi.Config, *options)) *testHost {
	t.Helper()
	return openTestHost(t, t.TempDir(), mod...)
}

func openTestHost(t *testing.T, dir string, mod ...func(*hostapi.Config, *options)) *testHost {
	t.Helper()
	cfg := hostapi.Config{DataDir: dir}
	opts := defaultOptions()
	opts.Threads = 2
	opts.MemoryLimit = 512 << 20
	for _, m := range mod {
		m(&cfg, &opts)
	}
	h, err := hostapi.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := register(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	th := &testHost{t: t, h: h, e: e, env: h.Env("default", "test-session"), dir: dir}
	t.Cleanup(func() { h.Close() })
	return th
}

func (th *testHost) upload(name string, body []byte) *store.File {
	th.t.Helper()
	return th.uploadTo(th.env.WS, name, body)
}

func (th *testHost) uploadTo(ws *store.Workspace, name string, body []byte) *store.File {
	th.t.Helper()
	f, err := ws.Create(context.Background(), store.CreateOptions{Name: name, Source: store.SourceUpload, Overwrite: true}, bytes.NewReader(body))
	if err != nil {
		th.t.Fatalf("upload %s: %v", name, err)
	}
	return f
}

// call runs a meta-tool and returns its snake_case result.
func (th *testHost) call(tool string, args map[string]any) map[string]any {
	th.t.Helper()
	res, err := th.h.Registry.CallTool(context.Background(), th.env, tool, args)
	if err != nil {
		th.t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res.(map[string]any)
}

// callErr runs a meta-tool that must fail and returns its error.
func (th *testHost) callErr(tool string, args map[string]any, want apierr.Code) error {
	th.t.Helper()
	_, err := th.h.Registry.CallTool(context.Background(), th.env, tool, args)
	if apierr.CodeOf(err) != want {
		th.t.Fatalf("%s %v: want %s, got %v", tool, args, want, err)
	}
	return err
}

func (th *testHost) sha(ref string) string {
	th.t.Helper()
	f, err := th.env.WS.Resolve(context.Background(), ref)
	if err != nil {
		th.t.Fatal(err)
	}
	return f.SHA256
}

// record is one row of the generated test data.
type record struct {
	ID     int
	Name   string
	Amount float64 // two decimals
	Qty    int
	Day    time.Time
	Active bool
	Note   string // "" is an empty field (null)
}

var testNames = []string{"José", "Zoë", "Ana María", "François", "Müller", "Ørsted", "Çelik", "Straße", "Núñez", "plain"}

func genRecords(n int) []record {
	out := make([]record, n)
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range out {
		r := record{
			ID:     i + 1,
			Name:   testNames[i%len(testNames)],
			Amount: math.Round(float64((i*7919)%500000)-100000) / 100,
			Qty:    (i * 13) % 97,
			Day:    base.AddDate(0, 0, i%365),
			Active: i%3 == 0,
		}
		if i%7 != 0 {
			r.Note = fmt.Sprintf("nota %d – “€%d”", i, i%50)
		}
		out[i] = r
	}
	return out
}

var testHeader = []string{"id", "nombre", "importe", "cantidad", "día", "activo", "nota"}

type csvStyle struct {
	delim        string
	crlf         bool
	decimalComma bool // 1.234,56
}

// genCSV writes records as delimited text (UTF-8; encode it afterwards).
func genCSV(recs []record, st csvStyle) string {
	var b strings.Builder
	nl := "\n"
	if st.crlf {
		nl = "\r\n"
	}
	b.WriteString(strings.Join(testHeader, st.delim) + nl)
	for _, r := range recs {
		amount := fmt.Sprintf("%.2f", r.Amount)
		if st.decimalComma {
			amount = commaAmount(r.Amount)
		}
		fields := []string{fmt.Sprint(r.ID), r.Name, amount, fmt.Sprint(r.Qty), r.Day.Format("2006-01-02"), fmt.Sprint(r.Active), r.Note}
		for i, f := range fields {
			if strings.Contains(f, st.delim) || strings.Contains(f, `"`) {
				fields[i] = `"` + strings.ReplaceAll(f, `"`, `""`) + `"`
			}
		}
		b.WriteString(strings.Join(fields, st.delim) + nl)
	}
	return b.String()
}

// commaAmount writes 1234.5 as 1.234,50.
func commaAmount(v float64) string {
	s := fmt.Sprintf("%.2f", math.Abs(v))
	intPart, frac, _ := strings.Cut(s, ".")
	var g []string
	for len(intPart) > 3 {
		g = append([]string{intPart[len(intPart)-3:]}, g...)
		intPart = intPart[:len(intPart)-3]
	}
	g = append([]string{intPart}, g...)
	out := strings.Join(g, ".") + "," + frac
	if v < 0 {
		out = "-" + out
	}
	return out
}

func encodeText(t *testing.T, s string, enc encoding.Encoding) []byte {
	t.Helper()
	if enc == nil {
		return []byte(s)
	}
	b, err := enc.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	utf16LEBOM = unicode.UTF16(unicode.LittleEndian, unicode.UseBOM)
	utf16BEBOM = unicode.UTF16(unicode.BigEndian, unicode.UseBOM)
	win1252    = charmap.Windows1252
)

func sumAmounts(recs []record) float64 {
	s := 0.0
	for _, r := range recs {
		s += r.Amount
	}
	return s
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func num(t *testing.T, v any) float64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("want a number, got %T %v", v, v)
	}
	return f
}

func strs(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, x := range arr {
		out[i] = fmt.Sprint(x)
	}
	return out
}

func rowsOf(v any) [][]any {
	arr, _ := v.([]any)
	out := make([][]any, len(arr))
	for i, x := range arr {
		out[i], _ = x.([]any)
	}
	return out
}
