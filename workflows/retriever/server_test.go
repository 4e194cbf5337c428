package retriever

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var testDocs = []Document{
	{"d0", "Oslo\nOslo is the capital of Norway."},
	{"d1", "Bergen\nBergen is a city on the west coast of Norway."},
	{"d2", "Lima\nLima is the capital of Peru."},
	{"d3", "Ada Lovelace\nAda Lovelace wrote the first program."},
}

func TestServerAndClient(t *testing.T) {
	srv := httptest.NewServer(NewServer(testDocs)) // real HTTP on 127.0.0.1
	defer srv.Close()
	c := &Client{URL: srv.URL + "/retrieve", TopK: 2}
	ps, err := c.Search(context.Background(), "capital of Peru")
	if err != nil {
		t.Fatal(err)
	}
	// BM25 by the index the server holds: d2 has "capital", "of" and "peru"; d0 "capital" and "of".
	want := New([]string{testDocs[0].Contents, testDocs[1].Contents, testDocs[2].Contents, testDocs[3].Contents}, DefaultParams()).Search("capital of Peru", 2)
	if len(ps) != 2 || ps[0].ID != "d2" || ps[1].ID != testDocs[want[1].Doc].ID || ps[0].Score != want[0].Score {
		t.Fatalf("passages %+v, want docs %+v", ps, want)
	}
	if got := FormatPassages(ps); !strings.HasPrefix(got, "Doc 1: Lima\nLima is the capital of Peru.\nDoc 2: ") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("FormatPassages = %q", got)
	}
	if ps, err := c.Search(context.Background(), "zebra"); err != nil || len(ps) != 0 {
		t.Fatalf("no match: %+v %v", ps, err)
	}
	c.MaxPassageBytes = 8
	if ps, _ := c.Search(context.Background(), "Lovelace"); len(ps) != 1 || ps[0].Contents != "Ada Love" {
		t.Fatalf("cut passage: %+v", ps)
	}
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestServerAPI(t *testing.T) {
	srv := httptest.NewServer(NewServer(testDocs))
	defer srv.Close()
	code, out := post(t, srv.URL+"/retrieve", `{"queries": ["Norway", "Peru"], "topk": 1, "return_scores": false}`)
	res, _ := out["result"].([]any)
	if code != 200 || len(res) != 2 {
		t.Fatalf("%d %v", code, out)
	}
	first := res[1].([]any)[0].(map[string]any)
	if first["id"] != "d2" || first["contents"] == nil || first["document"] != nil {
		t.Fatalf("without scores: %v", first)
	}
	code, out = post(t, srv.URL+"/retrieve", `{"query": "Norway", "return_scores": true}`)
	hits := out["result"].([]any)[0].([]any)
	if code != 200 || len(hits) != 2 || hits[0].(map[string]any)["document"] == nil || hits[0].(map[string]any)["score"] == nil {
		t.Fatalf("with scores: %d %v", code, out)
	}
	for _, body := range []string{`{}`, `{"query": "x", "topk": 0}`, `{"query": "x", "topk": 101}`, `not json`, `{"queries": "x"}`} {
		if code, _ := post(t, srv.URL+"/retrieve", body); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", body, code)
		}
	}
	if code, _ := post(t, srv.URL+"/search", `{"query": "x"}`); code != http.StatusNotFound {
		t.Errorf("other path: HTTP %d", code)
	}
	resp, err := http.Get(srv.URL + "/retrieve")
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestClientRetries(t *testing.T) {
	var calls atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		NewServer(testDocs).ServeHTTP(w, r)
	}))
	defer flaky.Close()
	c := &Client{URL: flaky.URL + "/retrieve", TopK: 1, Backoff: time.Millisecond}
	if ps, err := c.Search(context.Background(), "Peru"); err != nil || len(ps) != 1 || calls.Load() != 3 {
		t.Fatalf("after two 503s: %+v %v (%d calls)", ps, err, calls.Load())
	}
	calls.Store(0)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no such index", http.StatusBadRequest)
	}))
	defer bad.Close()
	c.URL = bad.URL
	if _, err := c.Search(context.Background(), "x"); !errors.Is(err, ErrServer) || calls.Load() != 1 || !strings.Contains(err.Error(), "no such index") {
		t.Fatalf("a 400 is not retried: %v (%d calls)", err, calls.Load())
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(300 * time.Millisecond):
		}
	}))
	defer slow.Close()
	calls.Store(0)
	c = &Client{URL: slow.URL, Timeout: 20 * time.Millisecond, Retries: 2, Backoff: time.Millisecond}
	if _, err := c.Search(context.Background(), "x"); err == nil || calls.Load() != 3 {
		t.Fatalf("timeouts: %v (%d calls, want 3)", err, calls.Load())
	}
	c = &Client{URL: "http://127.0.0.1:1/retrieve", Retries: -1}
	if _, err := c.Search(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestLoadCorpus(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "c.jsonl")
	os.WriteFile(good, []byte("{\"id\": \"a\", \"contents\": \"T\\nx\"}\n\n{\"id\": 7, \"contents\": \"U\\ny\", \"extra\": 1}\n"), 0o644)
	docs, err := LoadCorpus(good)
	if err != nil || len(docs) != 2 || docs[1].ID != "7" || docs[0].Contents != "T\nx" {
		t.Fatalf("%+v %v", docs, err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"id\": \"a\", \"contents\": \"x\"}\n{\"id\": \"a\", \"contents\": \"y\"}\n{\"contents\": \"z\"}\n{\"id\": \"b\"}\nnope\n{\"id\": true, \"contents\": \"w\"}\n"), 0o644)
	_, err = LoadCorpus(bad)
	var ce *CorpusError
	if !errors.As(err, &ce) || ce.Total != 5 || !strings.Contains(err.Error(), "line 2: duplicate id") || !strings.Contains(err.Error(), "line 5: ") {
		t.Fatalf("%v", err)
	}
	empty := filepath.Join(dir, "e.jsonl")
	os.WriteFile(empty, []byte("\n"), 0o644)
	if _, err := LoadCorpus(empty); err == nil {
		t.Fatal("empty corpus accepted")
	}
}
