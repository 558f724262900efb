package server

import "fmt"

// ConnectHelp is what `metaclaw serve` prints once it listens on base
// (http://HOST:PORT): where the page is, the MCP endpoint an agent
// connects to, and a tool call with curl. tokens says whether requests
// need a bearer token.
func ConnectHelp(base string, tokens bool) string {
	auth, hdr := "", ""
	if tokens {
		auth = "  (send Authorization: Bearer TOKEN)"
		hdr = " -H 'Authorization: Bearer TOKEN'"
	}
	return fmt.Sprintf("  workspace page  %s/\n  MCP endpoint    %s/mcp%s\n  tools over HTTP curl -s %s/api/tools/file_list%s -H 'Content-Type: application/json' -d '{}'\n",
		base, base, auth, base, hdr)
}
