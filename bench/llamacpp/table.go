package main

import (
	"fmt"
	"slices"
)

// stats are the minimum, median and maximum of a rate over the repetitions.
type stats struct{ min, med, max float64 }

// rates is n divided by each of secs.
func rates(n float64, secs []float64) stats {
	v := make([]float64, len(secs))
	for i, s := range secs {
		v[i] = n / s
	}
	slices.Sort(v)
	if len(v) == 0 {
		return stats{}
	}
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stats{v[0], med, v[len(v)-1]}
}

func (s stats) String() string { return fmt.Sprintf("%.2f / %.2f / %.2f", s.min, s.med, s.max) }

// printTable prints one line per (dtype, batch): tokens/s as min / median / max, the ratio
// of the medians (drmas ÷ llama.cpp), and the greedy tokens that agree.
func printTable(rows []row) {
	fmt.Println("\ntokens/s as min / median / max over the repetitions; ratio = drmas median ÷ llama.cpp median")
	fmt.Printf("%-5s %5s  %-22s %-22s %6s  %-22s %-22s %6s  %s\n", "dtype", "batch",
		"drmas wall", "llama.cpp wall", "ratio", "drmas per CPU-s×thr", "llama.cpp per CPU-s×thr", "ratio", "greedy tokens equal")
	for _, r := range rows {
		fmt.Printf("%-5v %5d  %-22v %-22v %6.2f  %-22v %-22v %6.2f  %d of %d (%.1f%%)\n", r.dtype, r.batch,
			r.drmas, r.llama, r.drmas.med/r.llama.med, r.drmasC, r.llamC, r.drmasC.med/r.llamC.med,
			r.same, r.all, 100*float64(r.same)/float64(max(r.all, 1)))
	}
}
