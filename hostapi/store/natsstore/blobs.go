package natsstore

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// blobs keeps bodies in the object store bucket. An object only becomes
// visible when its last chunk and its meta message are stored, so a put
// that dies half-way (even by SIGKILL) leaves no readable object.
type blobs struct{ c *conn }

var _ store.BlobStore = (*blobs)(nil)

// chunkSize is larger than the library's default (128 KB): fewer messages
// per body, well under the default 1 MB payload limit.
const chunkSize = 512 << 10

func (b *blobs) Put(ctx context.Context, key string, r io.Reader, size int64) (store.BlobInfo, error) {
	// A small body needs no 512 KB chunk buffer.
	chunk := uint32(min(max(size, 1024), chunkSize))
	info, err := b.c.bodies.Put(ctx, jetstream.ObjectMeta{Name: key, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunk}}, r)
	if err != nil {
		return store.BlobInfo{}, unavailable("storing a body", err)
	}
	return blobInfo(info), nil
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
	return errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, jetstream.ErrKeyNotFound)
}

func (b *blobs) Get(ctx context.Context, key string) (io.ReadCloser, store.BlobInfo, error) {
	res, err := b.c.bodies.Get(ctx, key)
	if notFound(err) {
		return nil, store.BlobInfo{}, apierr.New(apierr.NotFound, "the body is not in the shared store")
	}
	if err != nil {
		return nil, store.BlobInfo{}, unavailable("reading a body", err)
	}
	info, err := res.Info()
	if err != nil {
		res.Close()
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
