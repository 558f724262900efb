package main

import (
	"context"
	"io"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/server/toolspec"
)

// localBackend works on the data directory directly: the workspace and
// session of env, the runner and registry of h.
type localBackend struct {
	h   *hostapi.Host
	env *hostapi.Env
	// close closes h and what its store stands on (globals.closeHost).
	close func() error
}

func (l *localBackend) Close() error { return l.close() }

// actor records the CLI's session as the provenance of what the file
// commands change (the registry does this itself for run and tool).
func (l *localBackend) actor(ctx context.Context) context.Context {
	return store.WithActor(ctx, store.Actor{Session: l.env.Session})
}

func (l *localBackend) Upload(ctx context.Context, body io.Reader, u upload) (map[string]any, error) {
	f, err := l.env.WS.Create(l.actor(ctx), store.CreateOptions{Name: u.Name, Source: store.SourceUpload, Overwrite: u.Overwrite, TTL: u.TTL}, body)
	if err != nil {
		return nil, err
	}
	res := map[string]any{"id": f.ID, "name": f.Name, "size": f.Size, "mime_type": f.MimeType, "sha256": f.SHA256}
	if !f.ExpiresOn.IsZero() {
		res["expires_on"] = f.ExpiresOn.UTC().Format(time.RFC3339Nano)
	}
	return res, nil
}

func (l *localBackend) Download(ctx context.Context, ref string, open func(name string, size int64) (io.Writer, error)) (map[string]any, error) {
	rd, err := l.env.WS.Open(l.actor(ctx), ref)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	w, err := open(rd.Meta.Name, rd.Meta.Size)
	if err != nil {
		return nil, err
	}
	// The same words as the remote client's, so both modes report a
	// broken copy alike.
	if n, err := io.Copy(w, rd); err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "download interrupted after %d bytes: %v", n, err)
	}
	return map[string]any{"id": rd.Meta.ID, "name": rd.Meta.Name, "size": rd.Meta.Size}, nil
}

func (l *localBackend) List(ctx context.Context, pattern string) (map[string]any, error) {
	list, err := l.env.WS.List(l.actor(ctx), pattern)
	if err != nil {
		return nil, err
	}
	out := make([]files.Summary, len(list))
	for i, f := range list {
		out[i] = files.Summary{ID: f.ID, Name: f.Name, Size: f.Size, MimeType: f.MimeType, ModifiedOn: f.ModifiedOn}
	}
	// Projected as the server projects GET /api/files, so that one table
	// (filesList) reads both modes' answers.
	res, _ := hostapi.Project(map[string]any{"files": out}, hostapi.SnakeCase).(map[string]any)
	return res, nil
}

func (l *localBackend) Info(ctx context.Context, ref string) (any, error) {
	f, err := l.env.WS.Resolve(l.actor(ctx), ref)
	if err != nil {
		return nil, err
	}
	return hostapi.Project(files.NewInfo(f), hostapi.SnakeCase), nil
}

func (l *localBackend) Delete(ctx context.Context, ref string) error {
	return l.env.WS.Delete(l.actor(ctx), ref)
}

func (l *localBackend) Revert(ctx context.Context, ref string) (map[string]any, error) {
	f, err := l.env.WS.Revert(l.actor(ctx), ref)
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": f.ID, "name": f.Name, "size": f.Size}, nil
}

func (l *localBackend) Run(ctx context.Context, s script) (any, bool, error) {
	// Numbers exact or refused, as run_script's input at every other door.
	in, err := hostapi.ParseValue(s.Input)
	if err != nil {
		return nil, false, apierr.New(apierr.ValidationFailed, "--input: %s", apierr.Of(err).Message)
	}
	res := l.h.Runner.Run(ctx, l.env, hostapi.RunRequest{Code: s.Code, Wasm: s.Wasm, Input: in, Name: s.Name,
		Limits: hostapi.RunLimits{Timeout: s.Timeout}})
	return res, res.OK, nil
}

func (l *localBackend) CallTool(ctx context.Context, name string, args map[string]any) (any, error) {
	return l.h.Registry.CallTool(ctx, l.env, name, args)
}

// Tools lists the tools as GET /api/tools does, with the same profiles
// and shapes (server/toolspec).
func (l *localBackend) Tools(ctx context.Context, q toolQuery) (any, []toolLine, error) {
	list, err := l.h.Registry.Tools(ctx, l.env)
	if err != nil {
		return nil, nil, err
	}
	profile, err := toolspec.CheckProfile(q.Profile)
	if err != nil {
		return nil, nil, err
	}
	format, err := toolspec.CheckFormat(q.Format, q.API)
	if err != nil {
		return nil, nil, err
	}
	list = toolspec.Filter(list, profile)
	lines := make([]toolLine, len(list))
	for i, t := range list {
		lines[i] = toolLine{Name: t.Name, Description: t.Description}
	}
	out := map[string]any{"tools": toolspec.Render(list, toolspec.Options{Format: format, Strict: q.Strict})}
	if profile != toolspec.ProfileFull {
		out["profile"] = profile
	}
	return out, lines, nil
}
