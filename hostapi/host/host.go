// Package host assembles a Host with every built-in operation area
// registered. Whoever runs scripts sets Host.Runner afterwards (the runtime
// layer sits above hostapi).
package host

import (
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/agenttools"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/image"
	"github.com/metaclaw/metaclaw/hostapi/pdf"
	"github.com/metaclaw/metaclaw/hostapi/spreadsheet"
	"github.com/metaclaw/metaclaw/hostapi/table"
)

// Parts are the pieces of an assembled host that the server needs by name.
type Parts struct {
	Tools *agenttools.Tools
}

// Open builds a Host on cfg's data directory with all operations.
func Open(cfg hostapi.Config) (*hostapi.Host, *Parts, error) {
	h, err := hostapi.NewHost(cfg)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*hostapi.Host, *Parts, error) {
		h.Close()
		return nil, nil, err
	}
	for _, register := range []func(*hostapi.Host) error{
		files.Register,
		image.Register,
		pdf.Register,
		spreadsheet.Register,
		table.Register,
	} {
		if err := register(h); err != nil {
			return fail(err)
		}
	}
	tools, err := agenttools.Register(h)
	if err != nil {
		return fail(err)
	}
	return h, &Parts{Tools: tools}, nil
}
