package retriever

import (
	"math"
	"reflect"
	"testing"
)

// Worked by hand. Docs: d0 "ada lives in oslo" (4 tokens), d1 "oslo is in
// norway" (4), d2 "bob cooks" (2). N = 3, avgdl = 10/3, k1 = 1.2, b = 0.75.
//
//	IDF(norway) = IDF(bob) = ln((3−1+0.5)/(1+0.5)) = ln(5/3)   = 0.5108256238
//	IDF(oslo)   = IDF(in)  = ln((3−2+0.5)/(2+0.5)) = ln(3/5)   = −0.5108256238 (n > N/2: negative)
//	d1, |d|=4:  k1·(1 − b + b·4/(10/3)) = 1.2·(0.25 + 0.9) = 1.38
//	            tf part = 1·2.2/(1 + 1.38) = 0.9243697479
//	score("norway", d1) = 0.5108256238 · 0.9243697479 = 0.4721917531
//	d2, |d|=2:  k1·(0.25 + 0.75·0.6) = 0.84; tf part = 2.2/1.84 = 1.1956521739
//	score("bob", d2)    = 0.5108256238 · 1.1956521739 = 0.6107697675
//	score("oslo", d0) = score("oslo", d1) = −0.4721917531  (tie → d0 first)
//	score("oslo norway", d1) = −0.4721917531 + 0.4721917531 = 0
var handDocs = []string{"ada lives in oslo", "oslo is in norway", "bob cooks"}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBM25ByHand(t *testing.T) {
	ix := New(handDocs, DefaultParams())
	if !near(ix.IDF("norway"), 0.5108256238) || !near(ix.IDF("oslo"), -0.5108256238) || ix.DocFreq("in") != 2 {
		t.Fatalf("idf norway %v oslo %v", ix.IDF("norway"), ix.IDF("oslo"))
	}
	if s := ix.Score("norway", 1); !near(s, 0.4721917531) {
		t.Fatalf("score(norway, d1) = %.10f", s)
	}
	if s := ix.Score("bob", 2); !near(s, 0.6107697675) {
		t.Fatalf("score(bob, d2) = %.10f", s)
	}
	if s := ix.Score("oslo norway", 1); !near(s, 0) {
		t.Fatalf("score(oslo norway, d1) = %.10f", s)
	}
	if s := ix.Score("norway", 0); s != 0 {
		t.Fatalf("non-matching doc scored %v", s)
	}
	// Repeated query terms count once (k3 = 0).
	if ix.Score("norway norway NORWAY", 1) != ix.Score("norway", 1) {
		t.Fatal("duplicate query terms counted twice")
	}
	hits := ix.Search("norway", 5)
	if len(hits) != 1 || hits[0].Doc != 1 || !near(hits[0].Score, 0.4721917531) {
		t.Fatalf("hits %+v", hits)
	}
	// Negative-IDF tie: both docs match, doc id breaks the tie.
	hits = ix.Search("oslo", 5)
	if len(hits) != 2 || hits[0].Doc != 0 || hits[1].Doc != 1 || !near(hits[0].Score, -0.4721917531) {
		t.Fatalf("hits %+v", hits)
	}
	hits = ix.Search("oslo norway", 5)
	if len(hits) != 2 || hits[0].Doc != 1 || hits[1].Doc != 0 {
		t.Fatalf("hits %+v", hits)
	}
	// Search and Score agree exactly.
	for _, q := range []string{"ada oslo", "in is", "bob cooks oslo"} {
		for _, h := range ix.Search(q, 3) {
			if h.Score != ix.Score(q, h.Doc) {
				t.Fatalf("%q doc %d: search %v score %v", q, h.Doc, h.Score, ix.Score(q, h.Doc))
			}
		}
	}
	if ix.Search("zebra", 3) != nil || ix.Search("oslo", 0) != nil {
		t.Fatal("no-match / k=0 should return nothing")
	}
	if got := ix.Search("oslo", 1); len(got) != 1 || got[0].Doc != 0 {
		t.Fatalf("k=1: %+v", got)
	}
}

func TestTieBreakByDocID(t *testing.T) {
	ix := New([]string{"x y", "a b", "a b", "a b"}, DefaultParams())
	hits := ix.Search("a", 3)
	if !reflect.DeepEqual([]int{hits[0].Doc, hits[1].Doc, hits[2].Doc}, []int{1, 2, 3}) {
		t.Fatalf("hits %+v", hits)
	}
}

func TestTokenize(t *testing.T) {
	if got := Tokenize("Ada, LIVES in  Oslo!\n42x é"); !reflect.DeepEqual(got, []string{"ada", "lives", "in", "oslo", "42x", "é"}) {
		t.Fatalf("%q", got)
	}
	if len(Tokenize("  ,;  ")) != 0 {
		t.Fatal("empty")
	}
	ix := New([]string{"", "a"}, DefaultParams()) // empty documents are fine
	if h := ix.Search("a", 2); len(h) != 1 || h[0].Doc != 1 {
		t.Fatalf("%+v", h)
	}
	if New(nil, DefaultParams()).Search("a", 1) != nil {
		t.Fatal("empty index")
	}
}

func TestCorpus(t *testing.T) {
	a, b := GenerateCorpus(1, 300), GenerateCorpus(1, 300)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("corpus not deterministic")
	}
	if reflect.DeepEqual(a.Texts(), GenerateCorpus(2, 300).Texts()) {
		t.Fatal("seed ignored")
	}
	if len(a.Facts) != 2*300+len(a.Cities) || len(a.People) != 300 {
		t.Fatalf("%d facts", len(a.Facts))
	}
	words := map[string]bool{}
	for _, c := range a.Cities {
		words[c] = true
		words[a.CountryOf[c]] = true
	}
	for _, j := range a.Jobs {
		words[j] = true
	}
	names := map[string]bool{}
	for _, p := range a.People {
		if words[p] || names[p] || len(p) > MaxNameBytes || len(p) < 4 {
			t.Fatalf("bad name %q", p)
		}
		names[p] = true
	}
	for id, f := range a.Facts {
		if len(f.Text) > MaxFactBytes || len(Tokenize(f.Text)) != 4 || a.FactID[f.Subject+" "+f.Relation] != id {
			t.Fatalf("fact %d %+v", id, f)
		}
	}
	// Known queries: the right fact ranks strictly first, for every subject.
	ix := New(a.Texts(), DefaultParams())
	for _, f := range a.Facts {
		q := f.Subject + " " + f.Relation
		hits := ix.Search(q, 2)
		if hits[0].Doc != a.FactID[q] || !(hits[0].Score > hits[1].Score) {
			t.Fatalf("query %q: got %q first", q, ix.Doc(hits[0].Doc))
		}
	}
	// Also with a large corpus, where "lives" is in almost half the docs.
	big := GenerateCorpus(7, 2000)
	ix = New(big.Texts(), DefaultParams())
	for _, p := range big.People[:200] {
		if h := ix.Search(p+" lives", 1); h[0].Doc != big.FactID[p+" lives"] {
			t.Fatalf("big corpus: %q", p)
		}
	}
}
