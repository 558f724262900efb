package store

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A process starting on a data directory removes dead processes' temp
// directories; one created by another process a moment ago (not yet
// locked) must not be lost: every directory newProcTempDir returns exists
// and takes files, whatever cleaners run beside it.
func TestProcTempDirSurvivesCleaners(t *testing.T) {
	root := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				dead, unlock := deadTempEntries(root, "")
				for _, p := range dead {
					os.RemoveAll(p)
				}
				for _, u := range unlock {
					u()
				}
			}
		}()
	}
	for i := range 200 {
		d, err := newProcTempDir(root)
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		f, err := os.CreateTemp(d.path, "body-*")
		if err != nil {
			t.Fatalf("attempt %d: the temp directory is gone: %v", i, err)
		}
		f.Close()
		if _, err := os.Stat(filepath.Join(d.path, filepath.Base(f.Name()))); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		d.close()
	}
	close(stop)
	wg.Wait()
}
