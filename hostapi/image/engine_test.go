package image

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// TestRegisterStartsNothing runs in a child process, where libvips has
// not been started by another test: registering the image operations does
// not start libvips; Warm does, without loading libvips' optional modules
// (ImageMagick, poppler, …), and the operations then work.
func TestRegisterStartsNothing(t *testing.T) {
	if os.Getenv("METACLAW_IMAGE_TEST_CHILD") == "register" {
		h := hosttest.New(t, hostapi.Config{}, Register)
		libvips.mu.Lock()
		started := libvips.started
		libvips.mu.Unlock()
		if started {
			t.Fatal("Register started libvips")
		}
		if err := Warm(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !libvips.started {
			t.Fatal("Warm did not start libvips")
		}
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		for _, mod := range []string{"vips-modules", "libMagickCore", "libpoppler", "libopenslide", "libheif"} {
			if strings.Contains(string(maps), mod) {
				t.Errorf("libvips loaded %s, which no operation uses", mod)
			}
		}
		env := h.Env("default", "s")
		hosttest.Upload(t, env.WS, "p.png", encPNG(t, bands(12, 7, red)), false)
		res, err := h.Registry.CallTool(context.Background(), env, "image_info", map[string]any{"id": "p.png"})
		if err != nil || res.(map[string]any)["width"] != 12.0 {
			t.Fatalf("info after Warm: %v, %v", res, err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRegisterStartsNothing$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VIPSHOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "METACLAW_IMAGE_TEST_CHILD=register")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRegisterStartsNothing") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
