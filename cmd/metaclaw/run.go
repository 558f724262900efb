package main

import (
	"context"
	"encoding/json"
	"os"
	"os/signal"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
)

func cmdRun(g *globals, args []string) int {
	fs := newFlags("run", g)
	input := fs.String("input", "", "JSON input the script sees as `input`")
	timeout := fs.Duration("timeout", 30*time.Second, "wall-clock limit")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError("run: %v", err)
	}
	if len(pos) != 1 {
		return usageError("usage: metaclaw run SCRIPT.js [--input JSON] [--timeout 30s]")
	}
	code, err := os.ReadFile(pos[0])
	if err != nil {
		return usageError("run: %v", err)
	}
	var in any
	if *input != "" {
		if err := json.Unmarshal([]byte(*input), &in); err != nil {
			return usageError("run: --input is not valid JSON: %v", err)
		}
	}
	if g.server != "" {
		return remoteRun(g, pos[0], code, *input, *timeout)
	}
	h, err := g.openHost()
	if err != nil {
		return fail(g, err, true)
	}
	defer h.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res := h.Runner.Run(ctx, h.Env(g.workspace, g.session), hostapi.RunRequest{Code: string(code), Input: in, Name: pos[0],
		Limits: hostapi.RunLimits{Timeout: *timeout}})
	printJSON(res)
	if !res.OK {
		return 1
	}
	return 0
}
