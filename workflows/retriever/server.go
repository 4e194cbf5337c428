package retriever

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"unicode/utf8"
)

// Document is one passage of a retrieval corpus: Search-R1's {id, contents}, where contents
// is "title\ntext".
type Document struct {
	ID       string `json:"id"`
	Contents string `json:"contents"`
}

// maxCorpusProblems is how many bad lines a corpus error lists before it only counts them.
const maxCorpusProblems = 20

// CorpusError lists every unusable line of a corpus file (the first 20, then a count).
type CorpusError struct {
	File     string
	Problems []string // "line N: what"
	Total    int
}

func (e *CorpusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d unusable line(s):", e.File, e.Total)
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s: %s", e.File, p)
	}
	if n := e.Total - len(e.Problems); n > 0 {
		fmt.Fprintf(&b, "\n  and %d more", n)
	}
	return b.String()
}

// LoadCorpus reads a JSONL corpus, one {"id": …, "contents": "title\ntext"} object per line
// (id a string or a number; other fields ignored; blank lines skipped). Every unusable line
// is reported at once in a *CorpusError. Memory is proportional to the file.
func LoadCorpus(path string) ([]Document, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		docs []Document
		cerr = &CorpusError{File: path}
		ids  = map[string]int{}
	)
	bad := func(line int, format string, args ...any) {
		cerr.Total++
		if len(cerr.Problems) < maxCorpusProblems {
			cerr.Problems = append(cerr.Problems, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...))
		}
	}
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		b, rerr := r.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w", path, line, rerr)
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			if d, err := parseDocument(b); err != nil {
				bad(line, "%v", err)
			} else if prev, dup := ids[d.ID]; dup {
				bad(line, "duplicate id %q (first on line %d)", d.ID, prev)
			} else {
				ids[d.ID] = line
				docs = append(docs, d)
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	if cerr.Total > 0 {
		return nil, cerr
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no documents (want one {\"id\": …, \"contents\": \"title\\ntext\"} per line)", path)
	}
	return docs, nil
}

func parseDocument(b []byte) (Document, error) {
	if !utf8.Valid(b) {
		return Document{}, errors.New("not valid UTF-8")
	}
	var rec struct {
		ID       json.RawMessage `json:"id"`
		Contents *string         `json:"contents"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return Document{}, fmt.Errorf("want a JSON object with id and contents: %w", err)
	}
	if rec.Contents == nil || strings.TrimSpace(*rec.Contents) == "" {
		return Document{}, errors.New(`missing "contents"`)
	}
	id := ""
	if len(rec.ID) > 0 && rec.ID[0] == '"' {
		_ = json.Unmarshal(rec.ID, &id)
	} else if len(rec.ID) > 0 && string(rec.ID) != "null" {
		var n json.Number
		if err := json.Unmarshal(rec.ID, &n); err != nil {
			return Document{}, errors.New(`"id" must be a string or a number`)
		}
		id = n.String()
	}
	if strings.TrimSpace(id) == "" {
		return Document{}, errors.New(`missing "id"`)
	}
	return Document{ID: id, Contents: *rec.Contents}, nil
}

// Server answers Search-R1's retrieval API over a corpus with BM25 (see Index).
//
//	POST /retrieve {"query": "…"} or {"queries": ["…", …]}, "topk": 3, "return_scores": true
//	→ {"result": [[{"document": {"id": …, "contents": …}, "score": …}, …], …]}
//
// one list per query (a single "query" gives one list); without return_scores each item is
// the document itself. topk defaults to 3 and is at most MaxTopK; a request holds at most
// MaxQueries queries and MaxRequestBytes bytes.
type Server struct {
	docs  []Document
	index *Index
}

// Limits of one request.
const (
	MaxTopK         = 100
	MaxQueries      = 1024
	MaxRequestBytes = 1 << 20
)

// NewServer indexes docs.
func NewServer(docs []Document) *Server {
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Contents
	}
	return &Server{docs: docs, index: New(texts, DefaultParams())}
}

// Len is the number of documents served.
func (s *Server) Len() int { return len(s.docs) }

type retrieveRequest struct {
	Query        *string  `json:"query"`
	Queries      []string `json:"queries"`
	TopK         *int     `json:"topk"`
	ReturnScores bool     `json:"return_scores"`
}

type scoredDocument struct {
	Document Document `json:"document"`
	Score    float64  `json:"score"`
}

// ServeHTTP serves POST /retrieve.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/retrieve" {
		http.Error(w, `not found: the API is POST /retrieve`, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed: POST a JSON request", http.StatusMethodNotAllowed)
		return
	}
	var req retrieveRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	queries := req.Queries
	if req.Query != nil {
		queries = append([]string{*req.Query}, queries...)
	}
	k := 3
	if req.TopK != nil {
		k = *req.TopK
	}
	switch {
	case len(queries) == 0:
		http.Error(w, `bad request: give "query" or "queries"`, http.StatusBadRequest)
		return
	case len(queries) > MaxQueries:
		http.Error(w, fmt.Sprintf("bad request: %d queries, at most %d", len(queries), MaxQueries), http.StatusBadRequest)
		return
	case k < 1 || k > MaxTopK:
		http.Error(w, fmt.Sprintf("bad request: topk %d, want 1..%d", k, MaxTopK), http.StatusBadRequest)
		return
	}
	result := make([][]any, len(queries))
	for i, q := range queries {
		result[i] = []any{}
		for _, h := range s.index.Search(q, k) {
			if req.ReturnScores {
				result[i] = append(result[i], scoredDocument{s.docs[h.Doc], h.Score})
			} else {
				result[i] = append(result[i], s.docs[h.Doc])
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"result": result})
}
