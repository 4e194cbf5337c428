package s3store_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/drmas-dev/drmas/storage/s3store"
)

// BenchmarkUploadShard uploads the same 64 MiB payload (the size of a rollout shard)
// through Bucket.Put ("drmas") and through minio-go's PutObject directly ("raw"), both
// with default settings, against a local MinIO. The target is drmas >= 90% of raw:
//
//	go test -run '^$' -bench UploadShard ./storage/s3store
func BenchmarkUploadShard(b *testing.B) {
	const size = 64 << 20
	payload := make([]byte, size)
	r := rand.New(rand.NewChaCha8([32]byte{42}))
	for i := 0; i+8 <= size; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			payload[i+j] = byte(v >> (8 * j))
		}
	}
	srv := miniotest.Start(b)
	bucket := srv.NewBucket(b)
	ctx := context.Background()

	bk, err := s3store.New(ctx, s3store.Config{
		Endpoint: srv.Endpoint, Bucket: bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Insecure: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	c := srv.Client(b)
	// Warm both paths up (connections, bucket location, the server's first writes) so
	// that neither sub-benchmark pays a first-time cost the other does not.
	if err := bk.Put(ctx, "shard/drmas.parquet", bytes.NewReader(payload), size); err != nil {
		b.Fatal(err)
	}
	if _, err := c.PutObject(ctx, bucket, "shard/raw.parquet", bytes.NewReader(payload), size, minio.PutObjectOptions{}); err != nil {
		b.Fatal(err)
	}

	b.Run("drmas", func(b *testing.B) {
		b.SetBytes(size)
		b.ResetTimer()
		for b.Loop() {
			if err := bk.Put(ctx, "shard/drmas.parquet", bytes.NewReader(payload), size); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(size)
		b.ResetTimer()
		for b.Loop() {
			if _, err := c.PutObject(ctx, bucket, "shard/raw.parquet", bytes.NewReader(payload), size, minio.PutObjectOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
