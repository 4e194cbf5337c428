package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drmas-dev/drmas/internal/excerpt"
	"github.com/drmas-dev/drmas/workflows/retriever"
	"github.com/drmas-dev/drmas/workflows/searchgrade"
)

// RetrieverOptions point the search workflow at a Search-R1-style retrieval server (see
// retriever.Client) instead of its synthetic in-process corpus. Zero values mean defaults.
type RetrieverOptions struct {
	// URL of the server's endpoint, e.g. http://127.0.0.1:8000/retrieve; "" = the built-in
	// synthetic corpus.
	URL string `json:"url,omitempty"`
	// Timeout bounds one request (default 30s); Retries after a failed one (default 3,
	// negative none), with exponential backoff from 500ms.
	Timeout time.Duration `json:"timeout,omitempty"`
	Retries int           `json:"retries,omitempty"`
	// PassageBytes cuts each retrieved passage (default 512).
	PassageBytes int `json:"passage_bytes,omitempty"`
}

func (o RetrieverOptions) problems() []error {
	var errs []error
	if o.URL != "" && !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://") {
		errs = append(errs, fmt.Errorf("retriever_url: %s, want an http:// or https:// URL such as http://127.0.0.1:8000/retrieve", excerpt.Quote(o.URL)))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("retriever_timeout: %v, want ≥ 0 (0: 30s)", o.Timeout))
	}
	if o.PassageBytes < 0 || o.PassageBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("passage_bytes: %d, want 0..1048576 (0: 512)", o.PassageBytes))
	}
	return errs
}

func (o RetrieverOptions) client(topK int) *retriever.Client {
	if o.URL == "" {
		return nil
	}
	return &retriever.Client{URL: o.URL, TopK: topK, Timeout: o.Timeout, Retries: o.Retries, MaxPassageBytes: o.PassageBytes}
}

// Retrieved passages of a remote server live in the episode, under negative ids (−1 − their
// index in remote), so the episode's passage list holds both kinds.

// retrieve runs the searcher's query and returns the ids of the passages found.
func (e *searchEpisode) retrieve(q string) []int {
	c := e.w.opts.Retriever.client(e.w.opts.TopK)
	if c == nil {
		var ids []int
		for _, h := range e.w.index.Search(q, e.w.opts.TopK) {
			ids = append(ids, h.Doc)
		}
		return ids
	}
	ps, err := c.Search(context.Background(), q)
	if err != nil {
		// As the reference does, the agents see the failure instead of passages.
		n := e.w.opts.Retriever.PassageBytes
		if n == 0 {
			n = 512
		}
		ps = []retriever.Passage{{Contents: promptText("search failed: "+err.Error(), n)}}
	}
	var ids []int
	for _, p := range ps {
		text := strings.TrimSpace(p.Contents)
		id := 0 // never a remote id
		for i, r := range e.remote {
			if r == text {
				id = -1 - i
				break
			}
		}
		if id == 0 {
			e.remote = append(e.remote, text)
			id = -len(e.remote)
		}
		ids = append(ids, id)
	}
	return ids
}

// passageLines renders the visible passages: "P <fact>" lines for the built-in corpus, the
// reference's "Doc i: <contents>" lines for a retrieval server's passages.
func (e *searchEpisode) passageLines(b *strings.Builder) {
	var remote []retriever.Passage
	for _, d := range e.visible() {
		if d >= 0 {
			b.WriteString("P " + e.w.index.Doc(d) + "\n")
		} else {
			remote = append(remote, retriever.Passage{Contents: e.remote[-1-d]})
		}
	}
	b.WriteString(retriever.FormatPassages(remote))
}

// correct grades an answer (already parsed by ParseAnswerer) against the task's golden
// answers: SQuAD exact match with any of them (searchgrade.EM).
func (e *searchEpisode) correct(a string) bool {
	return a != "" && e.want != "" && searchgrade.EM(a, e.golden)
}

// F1Scorer is implemented by episodes that also score their answer by token F1 (the search
// workflow's), an evaluation metric beside the exact-match reward.
type F1Scorer interface {
	// F1 is the answer's best SQuAD token F1 over the golden answers; 0 until it is given.
	F1() float64
}

// F1 implements F1Scorer.
func (e *searchEpisode) F1() float64 {
	if e.answer == "" {
		return 0
	}
	return searchgrade.F1(e.answer, e.golden)
}

// parseAnswer reads an answerer response: the action "a <answer>" (ParseAnswerer), else a
// real model's last <answer>…</answer>, normalized as NormalizeAnswer does.
func parseAnswer(resp string) (string, bool) {
	if a, ok := ParseAnswerer(resp); ok || !strings.Contains(resp, "<answer>") {
		return a, ok
	}
	x, ok := searchgrade.Extract(resp)
	a := NormalizeAnswer(x)
	return a, ok && a != ""
}

// GoldenAnswers are a task's golden answers: the elements of an answer written as a JSON list
// of strings (a dataset's list of golden answers, as LoadTasks stores it), else the answer.
func GoldenAnswers(answer string) []string {
	if s := strings.TrimSpace(answer); strings.HasPrefix(s, "[") {
		var list []string
		if err := json.Unmarshal([]byte(s), &list); err == nil && len(list) > 0 {
			return list
		}
	}
	return []string{answer}
}
