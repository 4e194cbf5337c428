package retriever

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
)

// Relations of the synthetic facts. Every fact is exactly four words:
//
//	<person> lives in <city>
//	<person> works as <job>
//	<city> is in <country>
const (
	RelLives = "lives"
	RelWorks = "works"
	RelIs    = "is"
)

// MaxFactBytes bounds the text of every fact of every generated corpus.
const MaxFactBytes = 23

// MaxNameBytes bounds a generated person name.
const MaxNameBytes = 5

// Fact is one passage of the corpus.
type Fact struct {
	Subject, Relation, Object string
	Text                      string
}

// cityCountry is the fixed geography: city → country (≤ 7 bytes each).
var cityCountry = [][2]string{
	{"oslo", "norway"}, {"bergen", "norway"}, {"lima", "peru"}, {"cusco", "peru"},
	{"rome", "italy"}, {"milan", "italy"}, {"paris", "france"}, {"lyon", "france"},
	{"berlin", "germany"}, {"munich", "germany"}, {"madrid", "spain"}, {"seville", "spain"},
	{"cairo", "egypt"}, {"luxor", "egypt"}, {"tokyo", "japan"}, {"osaka", "japan"},
	{"quito", "ecuador"}, {"dakar", "senegal"}, {"accra", "ghana"}, {"kumasi", "ghana"},
	{"hanoi", "vietnam"}, {"hue", "vietnam"}, {"delhi", "india"}, {"mumbai", "india"},
}

var jobs = []string{"cook", "nurse", "pilot", "baker", "judge", "poet", "tailor", "farmer", "miner", "clerk", "guard", "potter"}

// Corpus is a deterministic set of synthetic facts. Document id = index in Facts.
type Corpus struct {
	Facts     []Fact
	People    []string // in generation order
	Cities    []string
	Countries []string // distinct, in first-seen order
	Jobs      []string
	LivesIn   map[string]string // person → city
	JobOf     map[string]string // person → job
	CountryOf map[string]string // city → country
	// FactID maps Subject+" "+Relation to the id of that fact (each subject
	// has at most one fact per relation).
	FactID map[string]int
}

// GenerateCorpus builds the corpus for seed with the given number of people
// (names are unique, 4–5 letters, never a city, country, job or relation
// word). Same (seed, people) → same corpus, fact order included.
func GenerateCorpus(seed uint64, people int) *Corpus {
	h := fnv.New64a()
	h.Write([]byte("retriever/corpus"))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	c := &Corpus{
		LivesIn: map[string]string{}, JobOf: map[string]string{}, CountryOf: map[string]string{},
		FactID: map[string]int{}, Jobs: append([]string(nil), jobs...),
	}
	reserved := map[string]bool{RelLives: true, RelWorks: true, RelIs: true, "in": true, "as": true}
	seenCountry := map[string]bool{}
	for _, cc := range cityCountry {
		c.Cities = append(c.Cities, cc[0])
		c.CountryOf[cc[0]] = cc[1]
		reserved[cc[0]], reserved[cc[1]] = true, true
		if !seenCountry[cc[1]] {
			seenCountry[cc[1]] = true
			c.Countries = append(c.Countries, cc[1])
		}
	}
	for _, j := range jobs {
		reserved[j] = true
	}
	const cons, vows = "bdfgklmnprstvz", "aeiou"
	if people > 4000 {
		panic(fmt.Sprintf("retriever: %d people is more than the name space allows", people))
	}
	for len(c.People) < people {
		b := []byte{cons[rng.IntN(len(cons))], vows[rng.IntN(len(vows))], cons[rng.IntN(len(cons))], vows[rng.IntN(len(vows))]}
		if rng.IntN(2) == 0 {
			b = append(b, cons[rng.IntN(len(cons))])
		}
		name := string(b)
		if reserved[name] {
			continue
		}
		reserved[name] = true
		c.People = append(c.People, name)
		c.LivesIn[name] = c.Cities[rng.IntN(len(c.Cities))]
		c.JobOf[name] = jobs[rng.IntN(len(jobs))]
	}
	for _, city := range c.Cities {
		c.Facts = append(c.Facts, Fact{city, RelIs, c.CountryOf[city], city + " is in " + c.CountryOf[city]})
	}
	for _, p := range c.People {
		c.Facts = append(c.Facts,
			Fact{p, RelLives, c.LivesIn[p], p + " lives in " + c.LivesIn[p]},
			Fact{p, RelWorks, c.JobOf[p], p + " works as " + c.JobOf[p]})
	}
	rng.Shuffle(len(c.Facts), func(i, j int) { c.Facts[i], c.Facts[j] = c.Facts[j], c.Facts[i] })
	for id, f := range c.Facts {
		c.FactID[f.Subject+" "+f.Relation] = id
	}
	return c
}

// Texts returns the fact texts in document-id order.
func (c *Corpus) Texts() []string {
	out := make([]string, len(c.Facts))
	for i, f := range c.Facts {
		out[i] = f.Text
	}
	return out
}
