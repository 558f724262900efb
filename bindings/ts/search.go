package ts

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	jsbind "github.com/metaclaw/metaclaw/bindings/js"
	"github.com/metaclaw/metaclaw/hostapi"
)

// The code profile shows a model three tools (run_script, search_api,
// file_list) instead of every operation's schema: search_api is how it
// finds the part of the sandbox API a task needs, as TypeScript it can
// call from run_script, without paying for the whole API up front.

// SearchTool is the meta-tool name of the API search.
const SearchTool = "search_api"

// APIMatch is one operation (or saved tool) that matches a search.
type APIMatch struct {
	// Name is the JS path ("files.spreadsheet.writeRange"), or
	// tools.call("name") for a saved tool, or the tool name of an
	// operation scripts cannot call (run_script).
	Name string `json:"name"`
	// Tool is the meta-tool name, when the operation is one.
	Tool string `json:"tool,omitempty"`
	// Declaration is the TypeScript signature to call it with.
	Declaration string `json:"declaration"`
	Doc         string `json:"doc"`
	// Example is a call that works, as a script writes it.
	Example string `json:"example,omitempty"`
}

// SearchResult is search_api's answer.
type SearchResult struct {
	Matches []APIMatch `json:"matches"`
	// Total is how many operations matched at all.
	Total int `json:"total"`
}

// Register adds search_api to h's registry unless it is there already.
// Whoever builds a host that offers the code profile calls it (the server
// does; the CLI should, so that `metaclaw tool search_api` works too).
func Register(h *hostapi.Host) {
	if h.Registry.ByTool(SearchTool) != nil {
		return
	}
	h.Registry.Add(SearchOp())
}

// SearchOp declares search_api.
func SearchOp() hostapi.Op {
	return hostapi.Op{
		Tool: SearchTool,
		Doc: "Search the sandbox API that run_script code calls (files.*, files.spreadsheet.*, files.pdf.*, files.image.*, files.table.*, tools.*, " +
			"and this workspace's saved tools): returns the best matches' TypeScript declarations, docs and an example call. Search before writing a script.",
		Params: []hostapi.Param{
			{Name: "query", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: `What you want to do, e.g. "spreadsheet write" or "pdf text"`, Required: true},
			{Name: "limit", Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": 20}, Doc: "Most matches to return (default 5)"},
		},
		Result:   SearchResult{},
		ReadOnly: true, Idempotent: true,
		Examples: []hostapi.Example{{
			Doc:  "Find how to write cells into a workbook",
			Args: map[string]any{"query": "spreadsheet write", "limit": 2},
			Want: map[string]any{"matches": []any{map[string]any{"name": "files.spreadsheet.writeRange"}}},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			var dyn []hostapi.ToolInfo
			if reg := c.Host.Registry; reg.Dynamic != nil {
				list, err := reg.Dynamic.ListTools(ctx, c.Env)
				if err != nil {
					return nil, err
				}
				dyn = list
			}
			return Search(c.Host.Registry, dyn, c.Args.String("query"), int(c.Args.IntOr("limit", 5))), nil
		},
	}
}

// candidate is one searchable entry with its tokens by field.
type candidate struct {
	match             APIMatch
	name, doc, params []string
	order             int
}

// Search ranks reg's operations and the saved tools dyn against query.
func Search(reg *hostapi.Registry, dyn []hostapi.ToolInfo, query string, limit int) SearchResult {
	terms := queryTerms(query)
	var cands []candidate
	for i, op := range reg.Ops() {
		if op.Tool == SearchTool {
			continue
		}
		c := candidate{order: i, doc: words(op.Doc)}
		for _, p := range op.Params {
			c.params = append(c.params, words(p.Name)...)
		}
		if op.Name != "" {
			c.match = APIMatch{Name: op.Name, Tool: op.Tool, Declaration: op.Namespace() + "." + Method(op), Doc: op.Doc}
			c.name = append(words(op.Name), words(op.Tool)...)
		} else {
			c.match = APIMatch{Name: op.Tool, Tool: op.Tool, Declaration: toolDeclaration(op.Tool, op.InputSchema()), Doc: op.Doc}
			c.name = words(op.Tool)
		}
		if len(op.Examples) > 0 {
			c.match.Example = ExampleCall(op, op.Examples[0].Args)
		}
		cands = append(cands, c)
	}
	for i, t := range dyn {
		decl := fmt.Sprintf("tools.call(name: %q, args%s: %s): Promise<any>", t.Name, optionalArgs(t.InputSchema), literalType(objectSchema(t.InputSchema), "  "))
		cands = append(cands, candidate{order: 10000 + i, name: append(words(t.Name), "tool", "saved"), doc: words(t.Description),
			match: APIMatch{Name: fmt.Sprintf("tools.call(%q)", t.Name), Tool: t.Name, Declaration: decl, Doc: t.Description}})
	}
	type scored struct {
		c     candidate
		score float64
	}
	var hits []scored
	for _, c := range cands {
		if s := score(terms, c); s > 0 {
			hits = append(hits, scored{c, s})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].c.order < hits[j].c.order
	})
	out := SearchResult{Matches: []APIMatch{}, Total: len(hits)}
	for i := 0; i < len(hits) && i < limit; i++ {
		out.Matches = append(out.Matches, hits[i].c.match)
	}
	return out
}

// score weighs where each query term occurs: in the name most, then in
// the parameters, then in the doc; exact tokens more than prefixes. An
// entry that matches every term beats one that matches some.
func score(terms []string, c candidate) float64 {
	if len(terms) == 0 {
		return 0
	}
	total, matched := 0.0, 0
	for _, t := range terms {
		best := max(fieldScore(t, c.name)*5, fieldScore(t, c.params)*1.5, fieldScore(t, c.doc))
		if best > 0 {
			matched++
		}
		total += best
	}
	coverage := float64(matched) / float64(len(terms))
	return total * coverage * coverage
}

// fieldScore is 1 for an exact token, 0.6 for a prefix either way (of at
// least three letters), else 0.
func fieldScore(term string, tokens []string) float64 {
	best := 0.0
	for _, tok := range tokens {
		switch {
		case tok == term:
			return 1
		case len(term) >= 3 && len(tok) >= 3 && (strings.HasPrefix(tok, term) || strings.HasPrefix(term, tok)):
			best = 0.6
		}
	}
	return best
}

// synonyms map the words people use to the words the API uses.
var synonyms = map[string][]string{
	"xlsx": {"spreadsheet"}, "excel": {"spreadsheet"}, "workbook": {"spreadsheet"}, "sheet": {"spreadsheet", "sheet"},
	"cell": {"cell", "spreadsheet"}, "csv": {"table", "csv"}, "sql": {"table", "query"}, "tabular": {"table"},
	"picture": {"image"}, "photo": {"image"}, "png": {"image"}, "jpeg": {"image"}, "jpg": {"image"}, "thumbnail": {"image", "resize"},
	"edit": {"write", "replace"}, "update": {"write"}, "modify": {"write"}, "change": {"write"}, "set": {"write", "set"},
	"remove": {"delete"}, "new": {"create"}, "make": {"create"}, "find": {"search"}, "grep": {"search"}, "open": {"read"},
	"get": {"read", "get", "info"}, "save": {"write", "save"}, "fetch": {"download"}, "url": {"download"}, "size": {"info", "resize"},
	"page": {"page", "pdf"}, "text": {"text"}, "form": {"form", "fill"}, "format": {"format"}, "undo": {"revert"}, "script": {"tool"},
}

// stopWords carry no meaning in a query ("text from a pdf").
var stopWords = map[string]bool{"a": true, "an": true, "the": true, "of": true, "to": true, "in": true, "into": true, "from": true,
	"for": true, "with": true, "and": true, "or": true, "on": true, "at": true, "by": true, "my": true, "how": true, "do": true,
	"i": true, "it": true, "is": true, "all": true, "some": true, "this": true, "that": true}

func queryTerms(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range words(q) {
		if stopWords[w] {
			continue
		}
		for _, t := range append([]string{w}, synonyms[w]...) {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// words splits text into lower-case tokens at non-letters, camelCase
// humps and underscores, with a plural s dropped.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) == 0 {
			return
		}
		w := string(cur)
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
		cur = cur[:0]
	}
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			flush()
			cur = append(cur, unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur = append(cur, unicode.ToLower(r))
		default:
			flush()
		}
		prev = r
	}
	flush()
	return out
}

// toolDeclaration renders a meta-tool that scripts cannot call as a
// function over its arguments object.
func toolDeclaration(name string, schema hostapi.Schema) string {
	return fmt.Sprintf("%s(args: %s): Promise<any>", name, literalType(schema, "  "))
}

// ExampleCall renders an example's meta-tool arguments (snake_case) as
// the JS call a script makes: positional arguments in order, the options
// object with camelCase keys, trailing absent arguments left out.
func ExampleCall(op *hostapi.Op, args map[string]any) string {
	if op.Name == "" {
		b, _ := json.Marshal(args)
		return op.Tool + " " + string(b)
	}
	var parts []string
	for _, s := range jsbind.SlotInfos(op) {
		if s.Param != nil {
			v, ok := args[s.Param.Name]
			if !ok {
				parts = append(parts, "undefined")
				continue
			}
			parts = append(parts, jsValue(v))
			continue
		}
		var fields []string
		for _, f := range s.Fields {
			if v, ok := args[f.Name]; ok {
				fields = append(fields, hostapi.CamelName(f.Name)+": "+jsValue(v))
			}
		}
		if len(fields) == 0 {
			parts = append(parts, "undefined")
			continue
		}
		parts = append(parts, "{ "+strings.Join(fields, ", ")+" }")
	}
	for len(parts) > 0 && parts[len(parts)-1] == "undefined" {
		parts = parts[:len(parts)-1]
	}
	return "await " + op.Name + "(" + strings.Join(parts, ", ") + ")"
}

func jsValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "undefined"
	}
	return string(b)
}
