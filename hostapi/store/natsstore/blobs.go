package natsstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// blobs keeps bodies in the object store bucket. A body is written as the
// object store lays it out — chunk messages on $O.<bucket>.C.<nuid>, then
// one meta message on $O.<bucket>.M.<name> — but streamed as the caller
// receives it, with a bounded number of chunks in flight (the library's
// Put buffers every chunk of a body until the server has them all). An
// object only becomes visible when its meta message is stored, so a put
// that dies half-way (even by SIGKILL) leaves no readable object; its
// chunks' subject starts with its host's id, so the janitor removes them
// once that host is dead.
type blobs struct{ c *conn }

var _ store.BlobStore = (*blobs)(nil)

const (
	// chunkSize: fewer, larger messages than the library's 128 KB, well
	// under the default 1 MB payload limit.
	chunkSize = 256 << 10
	// inFlight chunks per body: enough to keep the server busy, few
	// enough that a 50 MB upload holds ~2 MB.
	inFlight = 8
)

var chunkBufs = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// chunkToken names a body's chunk subject: its host (so that orphans of a
// dead host are known) and a unique suffix.
func (c *conn) chunkToken() string { return hostToken(c.hostID) + "_" + hostToken(uuid.NewString()) }

func hostToken(hostID string) string { return strings.ReplaceAll(hostID, "-", "") }

func (b *blobs) chunkSubject(token string) string {
	return "$O." + b.c.bodiesName + ".C." + token
}

func (b *blobs) metaSubject(key string) string {
	return "$O." + b.c.bodiesName + ".M." + base64.URLEncoding.EncodeToString([]byte(key))
}

type blobWriter struct {
	b       *blobs
	ctx     context.Context
	key     string
	token   string
	subject string
	buf     *[]byte
	n       int
	chunks  uint32
	size    int64
	acks    []ack
	err     error
	done    bool
}

type ack struct {
	fut jetstream.PubAckFuture
	buf *[]byte
}

func (b *blobs) Create(ctx context.Context, key string) (store.BlobWriter, error) {
	token := b.c.chunkToken()
	return &blobWriter{b: b, ctx: ctx, key: key, token: token, subject: b.chunkSubject(token)}, nil
}

func (w *blobWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	written := 0
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = chunkBufs.Get().(*[]byte)
			w.n = 0
		}
		k := copy((*w.buf)[w.n:], p)
		w.n += k
		p = p[k:]
		written += k
		if w.n == chunkSize {
			if err := w.send(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// send publishes the buffered chunk, waiting first for the oldest chunk
// in flight when there are too many.
func (w *blobWriter) send() error {
	for len(w.acks) >= inFlight {
		if err := w.settle(); err != nil {
			return err
		}
	}
	m := nats.NewMsg(w.subject)
	m.Data = (*w.buf)[:w.n]
	fut, err := w.b.c.js.PublishMsgAsync(m)
	if err != nil {
		chunkBufs.Put(w.buf)
		w.buf = nil
		w.err = unavailable("storing a body", err)
		return w.err
	}
	w.acks = append(w.acks, ack{fut, w.buf})
	w.chunks++
	w.size += int64(w.n)
	w.buf, w.n = nil, 0
	return nil
}

// settle waits for the oldest chunk in flight.
func (w *blobWriter) settle() error {
	a := w.acks[0]
	w.acks = w.acks[1:]
	var err error
	select {
	case <-a.fut.Ok():
	case err = <-a.fut.Err():
	case <-w.ctx.Done():
		err = w.ctx.Err()
	}
	chunkBufs.Put(a.buf)
	if err != nil && w.err == nil {
		w.err = unavailable("storing a body", err)
	}
	return w.err
}

func (w *blobWriter) Commit(size int64, sha string) (store.BlobInfo, error) {
	if w.done {
		return store.BlobInfo{}, apierr.New(apierr.Internal, "a body was committed twice")
	}
	if w.err == nil && w.buf != nil && w.n > 0 {
		w.send()
	} else if w.buf != nil {
		chunkBufs.Put(w.buf)
		w.buf = nil
	}
	for len(w.acks) > 0 {
		w.settle()
	}
	if w.err != nil {
		w.Abort()
		return store.BlobInfo{}, w.err
	}
	if w.size != size {
		w.Abort()
		return store.BlobInfo{}, apierr.New(apierr.Internal, "the body sent (%d bytes) is not the body written (%d bytes)", w.size, size)
	}
	raw, err := hex.DecodeString(sha)
	if err != nil || len(raw) != 32 {
		w.Abort()
		return store.BlobInfo{}, apierr.New(apierr.Internal, "a body's sha256 is malformed")
	}
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: w.key, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize}},
		Bucket:     w.b.c.bodiesName, NUID: w.token, Size: uint64(size), Chunks: w.chunks,
		Digest: "SHA-256=" + base64.URLEncoding.EncodeToString(raw),
	}
	data, _ := json.Marshal(info)
	m := nats.NewMsg(w.b.metaSubject(w.key))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = data
	if _, err := w.b.c.js.PublishMsg(w.ctx, m); err != nil {
		w.Abort()
		return store.BlobInfo{}, unavailable("storing a body", err)
	}
	w.done = true
	return store.BlobInfo{Key: w.key, Size: size, SHA256: sha}, nil
}

func (w *blobWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.buf != nil {
		chunkBufs.Put(w.buf)
		w.buf = nil
	}
	for _, a := range w.acks {
		select {
		case <-a.fut.Ok():
		case <-a.fut.Err():
		case <-w.ctx.Done():
		}
	}
	w.acks = nil
	if w.chunks > 0 {
		w.b.c.background(func(ctx context.Context) {
			w.b.c.bodiesStream.Purge(ctx, jetstream.WithPurgeSubject(w.subject))
		})
	}
}

func blobInfo(info *jetstream.ObjectInfo) store.BlobInfo {
	bi := store.BlobInfo{Key: info.Name, Size: int64(info.Size)}
	if d, ok := strings.CutPrefix(info.Digest, "SHA-256="); ok {
		if raw, err := base64.URLEncoding.DecodeString(d); err == nil {
			bi.SHA256 = hex.EncodeToString(raw)
		}
	}
	return bi
}

func notFound(err error) bool {
	return errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrMsgNotFound)
}

// Get reads a body of one chunk with one direct read of its message (the
// library's Get starts a consumer for every object); larger ones stream.
func (b *blobs) Get(ctx context.Context, key string) (io.ReadCloser, store.BlobInfo, error) {
	info, err := b.c.bodies.GetInfo(ctx, key)
	if notFound(err) {
		return nil, store.BlobInfo{}, apierr.New(apierr.NotFound, "the body is not in the shared store")
	}
	if err != nil {
		return nil, store.BlobInfo{}, unavailable("reading a body", err)
	}
	switch info.Chunks {
	case 0:
		return io.NopCloser(bytes.NewReader(nil)), blobInfo(info), nil
	case 1:
		m, err := b.c.bodiesStream.GetLastMsgForSubject(ctx, b.chunkSubject(info.NUID))
		if notFound(err) {
			return nil, store.BlobInfo{}, apierr.New(apierr.NotFound, "the body is not in the shared store")
		}
		if err != nil {
			return nil, store.BlobInfo{}, unavailable("reading a body", err)
		}
		return io.NopCloser(bytes.NewReader(m.Data)), blobInfo(info), nil
	}
	res, err := b.c.bodies.Get(ctx, key)
	if notFound(err) {
		return nil, store.BlobInfo{}, apierr.New(apierr.NotFound, "the body is not in the shared store")
	}
	if err != nil {
		return nil, store.BlobInfo{}, unavailable("reading a body", err)
	}
	return res, blobInfo(info), nil
}

func (b *blobs) Stat(ctx context.Context, key string) (store.BlobInfo, error) {
	info, err := b.c.bodies.GetInfo(ctx, key)
	if notFound(err) {
		return store.BlobInfo{}, apierr.New(apierr.NotFound, "the body is not in the shared store")
	}
	if err != nil {
		return store.BlobInfo{}, unavailable("reading a body's description", err)
	}
	return blobInfo(info), nil
}

func (b *blobs) Delete(ctx context.Context, key string) error {
	err := b.c.bodies.Delete(ctx, key)
	if err == nil || notFound(err) {
		return nil
	}
	return unavailable("deleting a body", err)
}
