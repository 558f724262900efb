package image

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/davidbyttow/govips/v2/vips"
)

// riffChunks lists the chunk tags of a WebP file and checks its sizes.
func riffChunks(t *testing.T, b []byte) []string {
	t.Helper()
	if string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" || int(binary.LittleEndian.Uint32(b[4:])) != len(b)-8 {
		t.Fatalf("not a well-formed RIFF/WEBP file: % x", b[:12])
	}
	var tags []string
	for i := 12; i < len(b); {
		n := int(binary.LittleEndian.Uint32(b[i+4:]))
		tags = append(tags, string(b[i:i+4]))
		i += 8 + n + n&1
		if i > len(b) {
			t.Fatalf("chunk %q overruns the file", tags[len(tags)-1])
		}
	}
	return tags
}

func TestWebPWithoutMetadata(t *testing.T) {
	if err := libvips.start(); err != nil {
		t.Fatal(err)
	}
	// A WebP as libvips writes it from a photo with EXIF: VP8X, VP8, EXIF.
	img, err := vips.NewImageFromBuffer(withOrientation(encJPEG(t, noise(40, 30)), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	withExif, _, err := img.ExportWebp(vips.NewWebpExportParams())
	if err != nil {
		t.Fatal(err)
	}
	if tags := riffChunks(t, withExif); len(tags) != 3 || tags[2] != "EXIF" {
		t.Fatalf("libvips wrote %v", tags)
	}
	clean := webpWithoutMetadata(withExif, true)
	if tags := riffChunks(t, clean); len(tags) != 1 || tags[0] != "VP8 " {
		t.Fatalf("after stripping: %v", tags)
	}
	if d := decode(t, clean); d.format != "webp" || d.img.Bounds().Dx() != 40 {
		t.Fatalf("decoded %s %v", d.format, d.img.Bounds())
	}

	// With alpha the extended header stays, its EXIF flag cleared.
	alpha, err := vips.NewImageFromBuffer(encPNG(t, quadrants(20, 10)))
	if err != nil {
		t.Fatal(err)
	}
	defer alpha.Close()
	alpha.SetBlob("exif-data", img.GetBlob("exif-data"))
	b, _, err := alpha.ExportWebp(vips.NewWebpExportParams())
	if err != nil {
		t.Fatal(err)
	}
	out := webpWithoutMetadata(b, false)
	tags := riffChunks(t, out)
	if tags[0] != "VP8X" || bytes.Contains([]byte(joinTags(tags)), []byte("EXIF")) {
		t.Fatalf("alpha image after stripping: %v", tags)
	}
	if flags := out[20]; flags&vp8xEXIF != 0 || flags&0x10 == 0 {
		t.Fatalf("VP8X flags %08b: want alpha set, EXIF clear", flags)
	}
	if d := decode(t, out); d.img.Bounds().Dx() != 20 || at(d.img, 19, 9).A != 0 {
		t.Fatalf("decoded %v, corner %v", d.img.Bounds(), at(d.img, 19, 9))
	}

	// Anything else is left alone.
	for _, junk := range [][]byte{nil, []byte("RIFF"), []byte("RIFF\xff\xff\xff\x00WEBPVP8 \xff\xff\xff\x7f"), encPNG(t, bands(2, 2, red))} {
		if got := webpWithoutMetadata(junk, false); !bytes.Equal(got, junk) {
			t.Fatalf("%q was changed", junk)
		}
	}
}

func joinTags(tags []string) string {
	var b bytes.Buffer
	for _, t := range tags {
		b.WriteString(t)
	}
	return b.String()
}
