package server

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// The banner's curl example works as printed.
func TestConnectHelp(t *testing.T) {
	e := start(t, opts{})
	e.upload("a.txt", []byte("x"), "")
	help := ConnectHelp(e.url, false)
	if !strings.Contains(help, e.url+"/mcp") || !strings.Contains(help, e.url+"/\n") || strings.Contains(help, "Bearer") {
		t.Fatalf("help:\n%s", help)
	}
	if !strings.Contains(ConnectHelp("http://h:1", true), "Authorization: Bearer TOKEN") {
		t.Fatal("no token hint")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	line := help[strings.Index(help, "curl -s"):]
	line = strings.TrimSpace(line[:strings.IndexByte(line, '\n')])
	out, err := exec.Command("bash", "-c", strings.Replace(line, "curl", curl, 1)).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var res struct{ Files []struct{ Name string } }
	if json.Unmarshal(out, &res) != nil || len(res.Files) != 1 || res.Files[0].Name != "a.txt" {
		t.Fatalf("curl answered %s", out)
	}
}
