package wasm

import (
	"sync"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// artifactLog collects what a run did to files (SPEC 5's files), one entry
// per file in the order first touched, folding repeated actions the way
// the JS runtime does: created then modified stays created, created then
// deleted leaves nothing, modified then deleted is deleted. Nested runs
// (a saved tool the module calls) report into it from their own goroutine.
type artifactLog struct {
	mu    sync.Mutex
	order []string
	byID  map[string]*hostapi.Artifact
}

func newArtifactLog() *artifactLog { return &artifactLog{byID: map[string]*hostapi.Artifact{}} }

func (l *artifactLog) record(f store.File, action string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.byID[f.ID]
	if a == nil {
		l.byID[f.ID] = &hostapi.Artifact{ID: f.ID, Name: f.Name, Action: action, IconType: f.IconType()}
		l.order = append(l.order, f.ID)
		return
	}
	switch {
	case a.Action == "created" && action == "deleted":
		delete(l.byID, f.ID)
		return
	case a.Action == "created":
	default:
		a.Action = action
	}
	a.Name = f.Name
	a.IconType = f.IconType()
}

func (l *artifactLog) list() []hostapi.Artifact {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []hostapi.Artifact{}
	for _, id := range l.order {
		if a := l.byID[id]; a != nil {
			out = append(out, *a)
		}
	}
	return out
}
