package convert

import (
	"bytes"
	"context"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
)

// MarkdownToHTML renders markdown (CommonMark + GFM tables, task lists,
// strikethrough, autolinks) as an HTML fragment that is safe to insert
// into a page: raw HTML in the source is left out (goldmark's default
// without WithUnsafe), and links or images whose URL could run code
// (javascript:, vbscript:, file:, non-image data:) lose their URL.
// Sources nested deeper than MaxNesting are refused before parsing, as for
// the other conversions: goldmark cannot be interrupted once it runs.
func MarkdownToHTML(ctx context.Context, md []byte) ([]byte, error) {
	if err := checkNesting(md); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	g := goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(html.WithXHTML()))
	if err := g.Convert(md, &out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
