package server

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/files"
)

// expiresWithin checks an expires_on answer: an RFC 3339 time about ttl
// after the upload.
func expiresWithin(t *testing.T, what string, v any, from, to time.Time, ttl time.Duration) time.Time {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s: expires_on %v, want a time", what, v)
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s: expires_on %q: %v", what, s, err)
	}
	if at.Before(from.Add(ttl).Add(-time.Second)) || at.After(to.Add(ttl).Add(time.Second)) {
		t.Fatalf("%s: expires_on %s, want %s after the upload (%s … %s)", what, at, ttl, from, to)
	}
	return at
}

func TestUploadTTL(t *testing.T) {
	e := start(t, opts{})
	ev := e.events("", "")
	// ttl as a query parameter.
	before := time.Now()
	up := e.upload("scratch.txt", []byte("intermediate"), "?ttl=3600")
	after := time.Now()
	at := expiresWithin(t, "query", up["expires_on"], before, after, time.Hour)
	info := e.json("GET", "/api/files/scratch.txt", nil, 200)
	if info["expires_on"] != up["expires_on"] {
		t.Fatalf("file info expires_on %v, upload said %v", info["expires_on"], up["expires_on"])
	}
	resp, _ := e.do("HEAD", "/api/files/scratch.txt", nil, nil)
	if h, _ := time.Parse(time.RFC3339, resp.Header.Get("X-File-Expires-On")); !h.Truncate(time.Second).Equal(at.Truncate(time.Second)) {
		t.Errorf("HEAD X-File-Expires-On %q, want %s", resp.Header.Get("X-File-Expires-On"), at)
	}
	hist := e.json("GET", "/api/history", nil, 200)
	var listed any
	for _, f := range hist["workspace"].(map[string]any)["workspace_files"].([]any) {
		if f.(map[string]any)["path"] == "/scratch.txt" {
			listed = f.(map[string]any)["expires_on"]
		}
	}
	expiresWithin(t, "history", listed, before, after, time.Hour)

	// ttl as a form field, before or after the file part (a curl -F form).
	for _, order := range []string{"before", "after"} {
		body, ct := formInOrder(t, order, "form.txt", []byte("x"), [2]string{"ttl", "120"}, [2]string{"name", "ttl/" + order + ".txt"})
		resp, b := e.do("POST", "/api/files/upload", body, map[string]string{"Content-Type": ct})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: %d %s", order, resp.StatusCode, b)
		}
		m := decode(t, b)
		expiresWithin(t, "field "+order, m["expires_on"], before, time.Now(), 2*time.Minute)
		if m["name"] != "ttl/"+order+".txt" {
			t.Errorf("%s: name %v", order, m["name"])
		}
	}
	// Without ttl nothing expires.
	up = e.upload("kept.txt", []byte("k"), "")
	if _, ok := up["expires_on"]; ok {
		t.Errorf("an upload without ttl has expires_on %v", up["expires_on"])
	}
	if info := e.json("GET", "/api/files/kept.txt", nil, 200); info["expires_on"] != nil {
		t.Errorf("info of a kept file: expires_on %v", info["expires_on"])
	}
	// Overwriting with a ttl gives the file a life from now.
	up = e.upload("kept.txt", []byte("k2"), "?overwrite=true&ttl=60")
	expiresWithin(t, "overwrite", up["expires_on"], before, time.Now(), time.Minute)

	// A file whose ttl runs out disappears, with the usual event.
	short := e.upload("gone-soon.txt", []byte("bye"), "?ttl=1")
	deadline := time.After(20 * time.Second)
	for {
		var got sseEvent
		select {
		case got = <-ev.events:
		case <-deadline:
			t.Fatal("no file:deleted for the expired upload")
		}
		if got.typ == "file:deleted" && got.data["id"] == short["id"] {
			break
		}
	}
	resp, b := e.do("GET", "/api/files/gone-soon.txt", nil, nil)
	errCode(t, resp, b, http.StatusNotFound, "NOT_FOUND")
	if _, b := e.do("GET", "/api/files/scratch.txt/download", nil, nil); string(b) != "intermediate" {
		t.Errorf("a file with time left is gone: %q", b)
	}
}

func TestUploadTTLBadInput(t *testing.T) {
	e := start(t, opts{})
	before := e.json("GET", "/api/files", nil, 200)
	for _, q := range []string{"0", "-5", "1.5", "abc", "", "31622401", "99999999999999999999", "1e3", " "} {
		body, ct := multipartBody(t, nil, "bad.txt", []byte("x"))
		resp, b := e.do("POST", "/api/files/upload?ttl="+strings.ReplaceAll(q, " ", "%20"), body, map[string]string{"Content-Type": ct})
		errCode(t, resp, b, http.StatusBadRequest, "VALIDATION_FAILED")
		if !strings.Contains(string(b), "ttl") || !strings.Contains(string(b), "31622400") {
			t.Errorf("ttl=%q: the message does not say what to send: %s", q, b)
		}
		// The same as a form field.
		body, ct = multipartBody(t, map[string]string{"ttl": q}, "bad.txt", []byte("x"))
		resp, b = e.do("POST", "/api/files/upload", body, map[string]string{"Content-Type": ct})
		errCode(t, resp, b, http.StatusBadRequest, "VALIDATION_FAILED")
	}
	// The upper bound itself is taken.
	up := e.upload("year.txt", []byte("y"), "?ttl=31622400")
	expiresWithin(t, "a year", up["expires_on"], time.Now().Add(-time.Minute), time.Now(), files.MaxTTLSeconds*time.Second)
	// A ttl field after a file that already streams (name and overwrite
	// settled by the query) would come too late: refused, nothing stored.
	body, ct := formInOrder(t, "after", "late.txt", []byte("x"), [2]string{"ttl", "60"}, [2]string{})
	resp, b := e.do("POST", "/api/files/upload?name=late.txt", body, map[string]string{"Content-Type": ct})
	errCode(t, resp, b, http.StatusBadRequest, "VALIDATION_FAILED")
	if !strings.Contains(string(b), "ttl") {
		t.Errorf("late ttl: %s", b)
	}
	// The same ttl repeated after the file is fine.
	body, ct = formInOrder(t, "after", "again.txt", []byte("x"), [2]string{"ttl", "60"}, [2]string{})
	resp, b = e.do("POST", "/api/files/upload?name=again.txt&ttl=60", body, map[string]string{"Content-Type": ct})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("repeated ttl: %d %s", resp.StatusCode, b)
	}
	e.do("DELETE", "/api/files/again.txt", nil, nil)
	e.do("DELETE", "/api/files/year.txt", nil, nil)
	if after := e.json("GET", "/api/files", nil, 200); mustJSON(after) != mustJSON(before) {
		t.Errorf("bad uploads changed the workspace:\n%v\n%v", before, after)
	}
}

// formInOrder builds a multipart form with a file part and fields (empty
// ones left out), the fields before or after the file.
func formInOrder(t *testing.T, order, filename string, content []byte, fields ...[2]string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	writeFields := func() {
		for _, f := range fields {
			if f[0] != "" {
				mw.WriteField(f[0], f[1])
			}
		}
	}
	if order == "before" {
		writeFields()
	}
	w, err := mw.CreateFormFile("file", filename)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(content)
	if order != "before" {
		writeFields()
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return m
}
