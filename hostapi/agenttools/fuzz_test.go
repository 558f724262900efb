package agenttools

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/scripts"
)

// FuzzParseHeader feeds script-tool sources to the header parser: it never
// panics, accepts only headers that name the tool and describe it, and what
// it accepts survives being written back as a header and parsed again.
func FuzzParseHeader(f *testing.F) {
	paths, _ := fs.Glob(scripts.FS, "*.js")
	for _, p := range paths {
		b, _ := fs.ReadFile(scripts.FS, p)
		f.Add(string(b))
	}
	for _, s := range []string{
		"",
		"return 1",
		"// @tool a_b\n// @description d\nreturn 1",
		"// @tool a_b\n// @description d\n// @input {\"type\":\"object\"}\n",
		"  // @tool   spaced_out  \n\t// @description   tabs\tand spaces \n\n// @input null\n",
		"// @tool x\n// @description y\n// @input [1,2]\n",
		"// @tool x\n// @description y\n// @input {\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}\r\n",
		"// @tool\n// @description\n",
		"/* @tool x */\n// @description y",
		"// @tool x\n// @description y\n// @input {\"a\":1e999}\n",
		"// @tool x\n// @description y\n// @input {\"a\":" + strings.Repeat("[", 2000) + "\n",
		"// @tool x\x00y\n// @description \xff\xfe\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		tool, err := ParseHeader(code)
		if err != nil {
			return
		}
		if tool.Name == "" || tool.Description == "" || tool.InputSchema == nil || tool.Code != code {
			t.Fatalf("accepted an incomplete header: %+v", tool)
		}
		if strings.ContainsAny(tool.Name, "\n") || strings.ContainsAny(tool.Description, "\n") {
			t.Fatalf("a header value spans lines: %+v", tool)
		}
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatalf("the parsed schema does not serialise: %v", err)
		}
		again, err := ParseHeader("// @tool " + tool.Name + "\n// @description " + tool.Description + "\n// @input " + string(schema) + "\nreturn 1;\n")
		if err != nil {
			t.Fatalf("re-parsing %+v: %v", tool, err)
		}
		if again.Name != tool.Name || again.Description != tool.Description || !reflect.DeepEqual(again.InputSchema, tool.InputSchema) {
			t.Fatalf("round trip changed the header: %+v → %+v", tool, again)
		}
	})
}
