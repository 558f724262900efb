package server

import (
	"sync"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// streamCaps bounds the long-lived event streams (GET /api/events and MCP's
// standalone GET stream): each holds a goroutine, a subscription with its
// buffer and a connection, so they are capped per workspace and in total,
// and a client beyond the cap gets BUSY instead of a stream.
type streamCaps struct {
	perWorkspace, total int

	mu    sync.Mutex
	open  map[string]int
	count int
}

func newStreamCaps(perWorkspace, total int) *streamCaps {
	return &streamCaps{perWorkspace: perWorkspace, total: total, open: map[string]int{}}
}

// acquire takes a stream slot of workspace; release gives it back.
func (c *streamCaps) acquire(workspace string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count >= c.total {
		return nil, apierr.New(apierr.Busy, "the server has %d event streams open, its limit; close one or retry shortly", c.total)
	}
	if c.open[workspace] >= c.perWorkspace {
		return nil, apierr.New(apierr.Busy, "workspace %q has %d event streams open, its limit; close one (one stream per page is enough) or retry shortly",
			workspace, c.perWorkspace)
	}
	c.open[workspace]++
	c.count++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.count--
			if c.open[workspace]--; c.open[workspace] == 0 {
				delete(c.open, workspace)
			}
		})
	}, nil
}
