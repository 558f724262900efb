// Package toolspec projects the registry's meta-tools into what LLM APIs
// accept: tool profiles (the full list, or the small code-mode surface),
// Anthropic's and OpenAI's tool shapes (Chat Completions and Responses),
// schemas valid under OpenAI's strict mode, and output schemas derived
// from each operation's Go result type for MCP. The server and the CLI
// share it, so every door offers the same lists.
package toolspec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Profiles a caller can ask for.
const (
	// ProfileFull offers every meta-tool (the default).
	ProfileFull = "full"
	// ProfileCode offers run_script, search_api and file_list: the model
	// searches the typed API and writes code against it instead of paying
	// for every schema on every request.
	ProfileCode = "code"
)

// codeTools are the code profile's tools, in the order they are offered.
var codeTools = []string{"run_script", "search_api", "file_list"}

// CheckProfile returns the canonical name of a profile ("" is full).
func CheckProfile(name string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", ProfileFull:
		return ProfileFull, nil
	case ProfileCode:
		return ProfileCode, nil
	}
	return "", apierr.New(apierr.ValidationFailed, "profile %q is not known; use %q (every tool, the default) or %q (run_script, search_api, file_list)", name, ProfileFull, ProfileCode)
}

// Filter returns the tools of list that profile offers, in its order.
func Filter(list []hostapi.ToolInfo, profile string) []hostapi.ToolInfo {
	if profile != ProfileCode {
		return list
	}
	by := map[string]hostapi.ToolInfo{}
	for _, t := range list {
		by[t.Name] = t
	}
	var out []hostapi.ToolInfo
	for _, n := range codeTools {
		if t, ok := by[n]; ok {
			out = append(out, t)
		}
	}
	return out
}

// Offers reports whether profile offers the tool name.
func Offers(profile, name string) bool {
	if profile != ProfileCode {
		return true
	}
	for _, n := range codeTools {
		if n == name {
			return true
		}
	}
	return false
}

// Formats of a tool list.
const (
	// FormatDefault is metaclaw's own list: {name, description,
	// input_schema, examples} (Anthropic's shape plus the examples).
	FormatDefault = ""
	// FormatAnthropic is exactly what Anthropic's Messages API accepts:
	// {name, description, input_schema}.
	FormatAnthropic = "anthropic"
	// FormatOpenAI is OpenAI's Chat Completions shape:
	// {type:"function", function:{name, description, parameters, strict?}}.
	FormatOpenAI = "openai"
	// FormatOpenAIResponses is OpenAI's Responses API shape:
	// {type:"function", name, description, parameters, strict?}.
	FormatOpenAIResponses = "openai-responses"
	// FormatMCP is MCP's tools/list shape with annotations.
	FormatMCP = "mcp"
)

// Options choose a tool list's shape.
type Options struct {
	Format string
	// Strict gives schemas valid under OpenAI's strict mode (see Strict).
	Strict bool
}

// CheckFormat returns the canonical format: "openai" with api
// "responses" is the Responses shape.
func CheckFormat(format, api string) (string, error) {
	f := strings.ToLower(strings.TrimSpace(format))
	switch f {
	case "", "default", "metaclaw":
		return FormatDefault, nil
	case FormatAnthropic, FormatMCP, FormatOpenAIResponses:
		return f, nil
	case FormatOpenAI:
		switch strings.ToLower(api) {
		case "", "chat", "chat-completions", "chat_completions":
			return FormatOpenAI, nil
		case "responses":
			return FormatOpenAIResponses, nil
		}
		return "", apierr.New(apierr.ValidationFailed, "api %q is not known for format openai; use chat (default) or responses", api)
	}
	return "", apierr.New(apierr.ValidationFailed, "format %q is not known; use anthropic, openai (&api=responses for the Responses API), mcp, or none for metaclaw's own list", format)
}

// Render shapes list as opt asks; the answer marshals to the JSON an API
// takes as its "tools".
func Render(list []hostapi.ToolInfo, opt Options) []any {
	out := make([]any, 0, len(list))
	for _, t := range list {
		schema := InputSchema(t)
		if opt.Strict {
			schema = Strict(schema)
		}
		switch opt.Format {
		case FormatAnthropic:
			out = append(out, map[string]any{"name": t.Name, "description": t.Description, "input_schema": schema})
		case FormatOpenAI:
			fn := map[string]any{"name": t.Name, "description": t.Description, "parameters": schema}
			if opt.Strict {
				fn["strict"] = true
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
		case FormatOpenAIResponses:
			fn := map[string]any{"type": "function", "name": t.Name, "description": t.Description, "parameters": schema}
			if opt.Strict {
				fn["strict"] = true
			}
			out = append(out, fn)
		case FormatMCP:
			out = append(out, map[string]any{"name": t.Name, "description": t.Description, "inputSchema": schema, "annotations": Annotations(t)})
		default:
			m := map[string]any{"name": t.Name, "description": t.Description, "input_schema": schema}
			if len(t.Examples) > 0 {
				m["examples"] = t.Examples
			}
			out = append(out, m)
		}
	}
	return out
}

// Annotations are MCP's tool hints, generated from the registry.
func Annotations(t hostapi.ToolInfo) map[string]any {
	return map[string]any{"readOnlyHint": t.ReadOnly, "destructiveHint": t.Destructive && !t.ReadOnly,
		"idempotentHint": t.Idempotent, "openWorldHint": t.OpenWorld}
}

// InputSchema is t's input schema as an object schema (a saved tool may
// have declared none, or one without a type).
func InputSchema(t hostapi.ToolInfo) hostapi.Schema {
	s := hostapi.Schema{}
	for k, v := range t.InputSchema {
		s[k] = v
	}
	if s["type"] != "object" {
		s["type"] = "object"
	}
	if _, ok := s["properties"]; !ok {
		s["properties"] = hostapi.Schema{}
	}
	return s
}

// Tokens estimates what a serialized tool list costs a model: a
// character count over four, the usual rule of thumb for English and JSON.
func Tokens(serialized []byte) int { return len(serialized) / 4 }

// sortedKeys lists a schema's property names in order, so that strict
// schemas (whose "required" lists them all) are deterministic.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describe(s hostapi.Schema, extra string) string {
	d, _ := s["description"].(string)
	if d == "" {
		return extra
	}
	return fmt.Sprintf("%s %s", d, extra)
}
