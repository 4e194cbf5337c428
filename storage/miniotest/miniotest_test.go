package miniotest_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/drmas-dev/drmas/storage/miniotest"
	"github.com/minio/minio-go/v7"
)

func TestStartRestart(t *testing.T) {
	s := miniotest.Start(t)
	if !strings.HasPrefix(s.Endpoint, "127.0.0.1:") || s.AccessKey == "" || s.SecretKey == "" {
		t.Fatalf("server %+v", s)
	}
	if !strings.Contains(s.Version(), "minio") {
		t.Errorf("Version %q", s.Version())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bucket := s.NewBucket(t)
	if bucket2 := s.NewBucket(t); bucket2 == bucket {
		t.Fatal("NewBucket returned the same name twice")
	}
	c := s.Client(t)
	if _, err := c.PutObject(ctx, bucket, "k", bytes.NewReader([]byte("v")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	endpoint := s.Endpoint
	s.Restart()
	if s.Endpoint != endpoint {
		t.Fatalf("endpoint changed across Restart: %s -> %s", endpoint, s.Endpoint)
	}
	obj, err := c.GetObject(ctx, bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	if err != nil || string(got) != "v" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
	s.Stop()
	s.Stop()
	short, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if _, err := s.Client(t).BucketExists(short, bucket); err == nil {
		t.Fatal("server still answers after Stop")
	}
}
