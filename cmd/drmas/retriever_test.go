package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRetrieverServe(t *testing.T) {
	corpus := filepath.Join(t.TempDir(), "c.jsonl")
	if err := os.WriteFile(corpus, []byte(`{"id": "1", "contents": "Lima\nLima is in Peru."}`+"\n"+`{"id": "2", "contents": "Oslo\nOslo is in Norway."}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	pr, pw := io.Pipe()
	root.SetErr(pw)
	root.SetOut(io.Discard)
	root.SetArgs([]string{"retriever", "serve", "--corpus", corpus, "--addr", "127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runRoot(ctx, root); pw.Close() }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no banner: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	_, rest, _ := strings.Cut(line, " on ")
	url, _, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(line, "retriever: 2 documents from ") || !strings.HasSuffix(url, "/retrieve") {
		t.Fatalf("banner %q", line)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"query": "peru", "topk": 1, "return_scores": true}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"contents":"Lima\nLima is in Peru."`) {
		t.Fatalf("answer %s", b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stopped with %v", err)
	}
	if _, _, err := execute(t, "retriever", "serve", "--corpus", filepath.Join(t.TempDir(), "missing.jsonl")); err == nil || !strings.Contains(err.Error(), "--corpus") {
		t.Fatalf("missing corpus: %v", err)
	}
}
