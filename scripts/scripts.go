// Package scripts embeds the built-in reusable tools: JS files whose header
// comment declares the tool (see agenttools.ParseHeader).
package scripts

import "embed"

// FS holds every built-in tool script.
//
//go:embed *.js
var FS embed.FS
