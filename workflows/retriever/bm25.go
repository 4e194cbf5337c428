// Package retriever is a small, exact BM25 retriever and the synthetic fact
// corpus used by the search workflow.
//
// Scoring is Okapi BM25 with k1 = 1.2, b = 0.75 by default:
//
//	score(q, d) = Σ_{t ∈ uniq(q)} IDF(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl))
//	IDF(t)      = ln((N − n(t) + 0.5) / (n(t) + 0.5))            (Robertson–Spärck Jones)
//
// N is the number of documents, n(t) the number of documents containing t,
// |d| the number of tokens of d and avgdl the mean over documents. Query
// terms are de-duplicated (k3 = 0). The IDF is the classic one, not floored:
// a term in more than half of the documents has a negative weight. Search
// returns only documents that contain at least one query term, ordered by
// score descending, ties broken by ascending document id, so results are
// deterministic. Tokens are maximal runs of Unicode letters and digits,
// lowercased. An Index is immutable after New and safe for concurrent use.
package retriever

import (
	"math"
	"sort"
	"strings"
	"unicode"
)

// Params are the BM25 free parameters.
type Params struct{ K1, B float64 }

// DefaultParams returns k1 = 1.2, b = 0.75.
func DefaultParams() Params { return Params{K1: 1.2, B: 0.75} }

// Tokenize lowercases s and splits it into maximal runs of letters and digits.
func Tokenize(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

type posting struct{ doc, tf int }

// Index is a BM25 index over a fixed list of documents; the document id is
// its position in that list.
type Index struct {
	p        Params
	docs     []string
	lens     []int
	avgdl    float64
	postings map[string][]posting // ascending doc id
}

// New indexes docs.
func New(docs []string, p Params) *Index {
	ix := &Index{p: p, docs: append([]string(nil), docs...), lens: make([]int, len(docs)), postings: map[string][]posting{}}
	total := 0
	for id, d := range docs {
		toks := Tokenize(d)
		ix.lens[id] = len(toks)
		total += len(toks)
		tf := map[string]int{}
		for _, t := range toks {
			tf[t]++
		}
		for t, c := range tf {
			ix.postings[t] = append(ix.postings[t], posting{id, c})
		}
	}
	if len(docs) > 0 {
		ix.avgdl = float64(total) / float64(len(docs))
	}
	return ix
}

// Len is the number of documents.
func (ix *Index) Len() int { return len(ix.docs) }

// Doc returns the text of document id.
func (ix *Index) Doc(id int) string { return ix.docs[id] }

// DocFreq is n(t), the number of documents containing term t (a token).
func (ix *Index) DocFreq(term string) int { return len(ix.postings[term]) }

// IDF is the Robertson–Spärck Jones IDF of term t.
func (ix *Index) IDF(term string) float64 {
	n := float64(ix.DocFreq(term))
	return math.Log((float64(len(ix.docs)) - n + 0.5) / (n + 0.5))
}

func (ix *Index) termScore(idf float64, tf, dl int) float64 {
	norm := 1.0
	if ix.avgdl > 0 {
		norm = 1 - ix.p.B + ix.p.B*float64(dl)/ix.avgdl
	}
	f := float64(tf)
	// K1·norm rounded before the sum (an explicit conversion), so no build fuses it into a
	// multiply-add: a near-tie ranks the same for GOAMD64=v1 and v3.
	return idf * f * (ix.p.K1 + 1) / (f + float64(ix.p.K1*norm))
}

func uniqueTerms(query string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range Tokenize(query) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// Score is the BM25 score of document id for query (0 when no term matches).
func (ix *Index) Score(query string, id int) float64 {
	s := 0.0
	for _, t := range uniqueTerms(query) {
		ps := ix.postings[t]
		i := sort.Search(len(ps), func(i int) bool { return ps[i].doc >= id })
		if i < len(ps) && ps[i].doc == id {
			s += ix.termScore(ix.IDF(t), ps[i].tf, ix.lens[id])
		}
	}
	return s
}

// Hit is one search result.
type Hit struct {
	Doc   int
	Score float64
}

// Search returns the k best documents containing at least one query term,
// by score descending then document id ascending.
func (ix *Index) Search(query string, k int) []Hit {
	if k <= 0 {
		return nil
	}
	scores := map[int]float64{}
	for _, t := range uniqueTerms(query) {
		ps := ix.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := ix.IDF(t)
		for _, p := range ps {
			scores[p.doc] += ix.termScore(idf, p.tf, ix.lens[p.doc])
		}
	}
	if len(scores) == 0 {
		return nil
	}
	hits := make([]Hit, 0, len(scores))
	for d, s := range scores {
		hits = append(hits, Hit{d, s})
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].Doc < hits[j].Doc
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits
}
