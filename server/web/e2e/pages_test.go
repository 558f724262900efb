package e2e

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// sha64 finds a content hash: messages name the user's file, never the
// preview copy.
var sha64 = regexp.MustCompile(`[0-9a-f]{64}`)

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// The PDF viewer's page route with the real engine: a PNG of the asked
// width with the page's shape, rendered once for concurrent viewers, kept
// (ETag, 304), nothing added to the user's workspace, and coded errors that
// name the user's file.
func TestPDFPages(t *testing.T) {
	s := startSite(t, nil)
	s.tool(t, "file_create", map[string]any{"name": "doc.pdf"})
	s.tool(t, "pdf_add_text", map[string]any{"id": "doc.pdf", "page": 1, "text": "Hello", "x": 72, "y": 72, "size": 28})
	var wg sync.WaitGroup
	bodies := make([][]byte, 4)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := get(t, s.url+"/api/files/doc.pdf/pages/1?width=600", nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
				t.Errorf("page: %d %s", resp.StatusCode, b)
			}
			bodies[i] = b
		}()
	}
	wg.Wait()
	img, err := png.Decode(bytes.NewReader(bodies[0]))
	if err != nil {
		t.Fatal(err)
	}
	if w, h := img.Bounds().Dx(), img.Bounds().Dy(); w != 600 || h != 849 {
		t.Fatalf("page is %d×%d, want 600×849 (A4)", w, h)
	}
	for _, b := range bodies[1:] {
		if !bytes.Equal(b, bodies[0]) {
			t.Fatal("concurrent viewers got different images")
		}
	}
	resp, _ := get(t, s.url+"/api/files/doc.pdf/pages/1?width=600", nil)
	etag := resp.Header.Get("ETag")
	if resp, _ = get(t, s.url+"/api/files/doc.pdf/pages/1?width=600", map[string]string{"If-None-Match": etag}); resp.StatusCode != 304 {
		t.Fatalf("revalidation: %d", resp.StatusCode)
	}
	// Nothing was added to the workspace.
	_, b := get(t, s.url+"/api/files", nil)
	var list struct{ Files []struct{ Name string } }
	json.Unmarshal(b, &list)
	if len(list.Files) != 1 || list.Files[0].Name != "doc.pdf" {
		t.Fatalf("workspace holds %s", b)
	}
	resp, b = get(t, s.url+"/api/files/doc.pdf/pages/7", nil)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"VALIDATION_FAILED"`) || !strings.Contains(string(b), "doc.pdf") || sha64.Match(b) {
		t.Fatalf("page out of range: %d %s", resp.StatusCode, b)
	}
	// A damaged PDF is a coded error too.
	s.put(t, "broken.pdf", []byte("%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF"))
	resp, b = get(t, s.url+"/api/files/broken.pdf/pages/1", nil)
	if resp.StatusCode < 400 || !strings.Contains(string(b), `"code"`) || !strings.Contains(string(b), "broken.pdf") {
		t.Fatalf("broken pdf: %d %s", resp.StatusCode, b)
	}
}
