package retriever

import (
	"strings"
	"testing"
)

// FuzzDecode: a server's answer decodes to passages within the length bound or to an error,
// never a panic; a corpus line parses to a document with an id and contents or to an error.
// Run with: go test ./workflows/retriever -run '^$' -fuzz '^FuzzDecode$' -fuzztime 30s
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"result": [[{"document": {"id": "1", "contents": "T\nx"}, "score": 1.5}]]}`,
		`{"result": [[{"id": "1", "contents": "héllo wörld"}]]}`, `{"result": []}`, `{"result": [[1]]}`, `[]`,
		`{"id": 3, "contents": "a"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &Client{MaxPassageBytes: 5}
		ps, err := c.decode(b)
		for _, p := range ps {
			if err != nil || len(p.Contents) > 5 || strings.ContainsRune(p.Contents, '\uFFFD') && !strings.ContainsRune(string(b), '\uFFFD') && len(p.Contents) < 3 {
				t.Fatalf("passage %+v (err %v)", p, err)
			}
		}
		if d, err := parseDocument(b); err == nil && (strings.TrimSpace(d.ID) == "" || strings.TrimSpace(d.Contents) == "") {
			t.Fatalf("document %+v accepted", d)
		}
	})
}
