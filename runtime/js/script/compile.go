package script

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/dop251/goja"
)

// programs caches compiled scripts: saved tools and retried scripts run
// the same code again and again. A goja Program is not tied to a VM and
// may be run by many at once.
var programs = struct {
	sync.Mutex
	m map[string]*goja.Program
}{m: map[string]*goja.Program{}}

const (
	maxCachedPrograms = 256
	maxCachedCode     = 64 << 10
)

// Compile compiles code as the body of an async function named name.
func Compile(name, code string) (*goja.Program, error) {
	cache := len(code) <= maxCachedCode
	key := name + "\x00" + code
	if cache {
		programs.Lock()
		p := programs.m[key]
		programs.Unlock()
		if p != nil {
			return p, nil
		}
	}
	p, err := goja.Compile(name, "(async function() {\n"+code+"\n})()", false)
	if err != nil {
		return nil, err
	}
	if cache {
		programs.Lock()
		if len(programs.m) >= maxCachedPrograms {
			clear(programs.m)
		}
		programs.m[key] = p
		programs.Unlock()
	}
	return p, nil
}

// ShiftLines corrects line numbers in messages for the one-line wrapper
// the script body is compiled inside.
func ShiftLines(s string) string {
	s = parseLineRef.ReplaceAllStringFunc(s, func(m string) string {
		var line, col int
		if n, _ := fmt.Sscanf(m, "Line %d:%d", &line, &col); n == 2 && line > 1 {
			return fmt.Sprintf("line %d column %d:", line-1, col)
		}
		return m
	})
	return lineRef.ReplaceAllStringFunc(s, func(m string) string {
		var name string
		var line, col int
		if n, _ := fmt.Sscanf(strings.ReplaceAll(m, ":", " "), "%s %d %d", &name, &line, &col); n == 3 && line > 1 {
			return fmt.Sprintf("%s:%d:%d", name, line-1, col)
		}
		return m
	})
}

var (
	lineRef      = regexp.MustCompile(`[\w.-]+:\d+:\d+`)
	parseLineRef = regexp.MustCompile(`Line \d+:\d+`)
)
