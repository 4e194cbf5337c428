package retriever

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Client calls a Search-R1-style retrieval server (Server, or Search-R1's retrieval_server.py):
// POST URL {"query", "topk", "return_scores": true}. Connection errors, timeouts and 500, 502,
// 503 and 504 answers are retried with exponential backoff; other answers are errors at once.
// Safe for concurrent use.
type Client struct {
	URL  string
	TopK int
	// Timeout bounds one attempt (default 30s).
	Timeout time.Duration
	// Retries after the first attempt (default 3; negative: none). Attempt n+1 waits
	// Backoff·2ⁿ (Backoff default 500ms).
	Retries int
	Backoff time.Duration
	// MaxPassageBytes cuts each passage's contents (on a rune boundary; default 512).
	MaxPassageBytes int
	HTTP            *http.Client
}

// Passage is one retrieved document.
type Passage struct {
	ID       string
	Contents string
	Score    float64
}

// maxResponseBytes bounds a server's answer.
const maxResponseBytes = 16 << 20

// ErrServer is wrapped by the errors of a server that answered but not with results.
var ErrServer = errors.New("retrieval server error")

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 30 * time.Second
}

func (c *Client) retries() int {
	switch {
	case c.Retries < 0:
		return 0
	case c.Retries == 0:
		return 3
	}
	return c.Retries
}

func (c *Client) backoff() time.Duration {
	if c.Backoff > 0 {
		return c.Backoff
	}
	return 500 * time.Millisecond
}

func (c *Client) passageBytes() int {
	if c.MaxPassageBytes > 0 {
		return c.MaxPassageBytes
	}
	return 512
}

// Search returns the top passages for query, best first.
func (c *Client) Search(ctx context.Context, query string) ([]Passage, error) {
	body, err := json.Marshal(map[string]any{"query": query, "topk": max(c.TopK, 1), "return_scores": true})
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt <= c.retries(); attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("retriever %s: %w (after: %w)", c.URL, ctx.Err(), last)
			case <-time.After(c.backoff() << min(attempt-1, 16)):
			}
		}
		ps, retry, err := c.attempt(ctx, body)
		if err == nil {
			return ps, nil
		}
		last = err
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("retriever %s: %w", c.URL, last)
}

// attempt makes one request; retry says whether another may succeed.
func (c *Client) attempt(ctx context.Context, body []byte) (ps []Passage, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, true, err // refused, reset, timed out: Search stops when its own ctx is done
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, true, err
	}
	switch {
	case resp.StatusCode == 500, resp.StatusCode == 502, resp.StatusCode == 503, resp.StatusCode == 504:
		return nil, true, fmt.Errorf("%w: HTTP %d: %s", ErrServer, resp.StatusCode, excerpt(b))
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("%w: HTTP %d: %s", ErrServer, resp.StatusCode, excerpt(b))
	case len(b) > maxResponseBytes:
		return nil, false, fmt.Errorf("%w: answer over %d bytes", ErrServer, maxResponseBytes)
	}
	ps, err = c.decode(b)
	return ps, false, err
}

func excerpt(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// decode reads {"result": [[item, …]]} where an item is {"document": doc, "score": x} or the
// doc itself; only the first query's list is used.
func (c *Client) decode(b []byte) ([]Passage, error) {
	var res struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%w: want {\"result\": [[…]]}: %v", ErrServer, err)
	}
	if len(res.Result) == 0 {
		return nil, nil
	}
	var items []struct {
		Doc      *Document `json:"document"`
		Score    float64   `json:"score"`
		ID       string    `json:"id"`
		Contents string    `json:"contents"`
	}
	if err := json.Unmarshal(res.Result[0], &items); err != nil {
		return nil, fmt.Errorf("%w: want a list of documents per query: %v", ErrServer, err)
	}
	out := make([]Passage, 0, len(items))
	for _, it := range items {
		d := it.Doc
		if d == nil {
			d = &Document{ID: it.ID, Contents: it.Contents}
		}
		out = append(out, Passage{ID: d.ID, Contents: cut(strings.TrimSpace(d.Contents), c.passageBytes()), Score: it.Score})
	}
	return out, nil
}

// cut shortens s to at most n bytes on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// FormatPassages renders passages as the reference's _passages2string does: one
// "Doc i: <contents>" line per passage, numbered from 1.
func FormatPassages(ps []Passage) string {
	var b strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&b, "Doc %d: %s\n", i+1, strings.TrimSpace(p.Contents))
	}
	return b.String()
}
