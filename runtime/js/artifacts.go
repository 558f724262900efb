package js

import (
	"sync"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// ArtifactLog collects what a run did to files, one entry per file in the
// order first touched, folding repeated actions: created then modified is
// still created; created then deleted leaves nothing; modified then deleted
// is deleted.
type ArtifactLog struct {
	mu    sync.Mutex
	order []string
	byID  map[string]*hostapi.Artifact
}

// NewArtifactLog returns an empty log.
func NewArtifactLog() *ArtifactLog { return &ArtifactLog{byID: map[string]*hostapi.Artifact{}} }

// Record notes that the run did action to f.
func (l *ArtifactLog) Record(f store.File, action string) {
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
		// stays created
	default:
		a.Action = action
	}
	a.Name = f.Name
	a.IconType = f.IconType()
}

// List is the folded log, in the order files were first touched.
func (l *ArtifactLog) List() []hostapi.Artifact {
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
