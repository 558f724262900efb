package textenc

import (
	"errors"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/transform"
)

// windows1252 is Windows-1252 as the WHATWG encoding standard defines it:
// x/text's charmap, except that the five bytes Microsoft left undefined
// (0x81, 0x8D, 0x8F, 0x90, 0x9D) decode to the C1 controls of the same
// number instead of U+FFFD. Every byte then decodes to a character that
// encodes back to that byte, so reading a file and writing it back never
// changes bytes an edit did not touch.
var windows1252 encoding.Encoding = w1252{}

var (
	w1252Decode [256]rune
	w1252Encode = map[rune]byte{}
)

func init() {
	for i := 0; i < 256; i++ {
		r := charmap.Windows1252.DecodeByte(byte(i))
		if r == utf8.RuneError {
			r = rune(i)
		}
		w1252Decode[i] = r
		if i >= 0x80 {
			w1252Encode[r] = byte(i)
		}
	}
}

type w1252 struct{}

func (w1252) NewDecoder() *encoding.Decoder { return &encoding.Decoder{Transformer: w1252Decoder{}} }
func (w1252) NewEncoder() *encoding.Encoder { return &encoding.Encoder{Transformer: w1252Encoder{}} }

type w1252Decoder struct{ transform.NopResetter }

func (w1252Decoder) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		c := src[nSrc]
		if c < utf8.RuneSelf {
			if nDst >= len(dst) {
				return nDst, nSrc, transform.ErrShortDst
			}
			dst[nDst] = c
			nDst++
			nSrc++
			continue
		}
		r := w1252Decode[c]
		if nDst+utf8.RuneLen(r) > len(dst) {
			return nDst, nSrc, transform.ErrShortDst
		}
		nDst += utf8.EncodeRune(dst[nDst:], r)
		nSrc++
	}
	return nDst, nSrc, nil
}

var errNotInWindows1252 = errors.New("character not in windows-1252")

type w1252Encoder struct{ transform.NopResetter }

func (w1252Encoder) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		if nDst >= len(dst) {
			return nDst, nSrc, transform.ErrShortDst
		}
		c := src[nSrc]
		if c < utf8.RuneSelf {
			dst[nDst] = c
			nDst++
			nSrc++
			continue
		}
		if !atEOF && !utf8.FullRune(src[nSrc:]) {
			return nDst, nSrc, transform.ErrShortSrc
		}
		r, size := utf8.DecodeRune(src[nSrc:])
		b, ok := w1252Encode[r]
		if !ok || (r == utf8.RuneError && size == 1) {
			return nDst, nSrc, errNotInWindows1252
		}
		dst[nDst] = b
		nDst++
		nSrc += size
	}
	return nDst, nSrc, nil
}
