package files

import (
	"context"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/download"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

func downloadOp(h *hostapi.Host) hostapi.Op {
	return hostapi.Op{
		Name: "files.download", Tool: "file_download",
		Doc: "Download an http(s) URL into the workspace (fetched by the server; private and loopback addresses are refused). " +
			"The file name comes from filename, else from the server or the URL.",
		Params: []hostapi.Param{
			{Name: "url", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "http or https URL", Required: true},
			{Name: "filename", Schema: hostapi.String(), Doc: "Optional workspace path for the file; inferred from the URL if omitted"},
		},
		Result: Downloaded{}, OpenWorld: true,
		Examples: []hostapi.Example{{
			Doc:  "Fetch a CSV from the web into the workspace under a chosen name",
			Args: map[string]any{"url": "https://example.com/data/sales.csv", "filename": "in/sales.csv"},
			Want: map[string]any{"name": "in/sales.csv"},
		}},
		Handler: func(ctx context.Context, c *hostapi.Call) (any, error) {
			maxFile, _ := c.Host.Store.Limits()
			res, err := download.Fetch(ctx, c.Args.String("url"), download.Options{
				AllowPrivate: c.Host.Config.AllowPrivateDownloads,
				MaxBytes:     maxFile,
				Timeout:      2 * time.Minute,
			})
			if err != nil {
				return nil, err
			}
			defer res.Body.Close()
			name := c.Args.String("filename")
			if name == "" {
				name = res.Filename
			}
			f, err := c.WS.Create(ctx, store.CreateOptions{Name: name, MimeType: res.ContentType, Source: store.SourceCreated}, res.Body)
			if err != nil {
				return nil, err
			}
			return Downloaded{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType}, nil
		},
	}
}
