// Package pooled holds the statistics of an on-policy ablation pooled over seeds: t-intervals
// of paired held-out differences, grad-norm spike counts, the Lemma 4.2 inflation factor's
// distribution, and the fit of measured grad-norm ratios on the ratio the inflation predicts.
// It reads nothing: callers pass plain records (report/pooled.go queries them).
package pooled

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Interval is a two-sided Student-t confidence interval for the mean of N values, with DF =
// N − 1 degrees of freedom. With fewer than two values SD, SE, T, Lo and Hi are NaN.
type Interval struct {
	N, DF                   int
	Level                   float64 // e.g. 0.95
	Mean, SD, SE, T, Lo, Hi float64
}

// TInterval is the level interval of the mean of x: mean ± t_{(1+level)/2, N−1} · sd/√N, sd the
// sample (N − 1) standard deviation. Non-finite values are an input error the caller must not
// pass; they propagate as NaN.
func TInterval(x []float64, level float64) Interval {
	nan := math.NaN()
	iv := Interval{N: len(x), DF: max(len(x)-1, 0), Level: level, Mean: nan, SD: nan, SE: nan, T: nan, Lo: nan, Hi: nan}
	if iv.N == 0 {
		return iv
	}
	iv.Mean = mean(x)
	if iv.N < 2 {
		return iv
	}
	var ss float64
	for _, v := range x {
		ss += float64((v - iv.Mean) * (v - iv.Mean))
	}
	iv.SD = math.Sqrt(ss / float64(iv.N-1))
	iv.SE = iv.SD / math.Sqrt(float64(iv.N))
	iv.T = distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(iv.DF)}.Quantile((1 + level) / 2)
	half := float64(iv.T * iv.SE)
	iv.Lo, iv.Hi = iv.Mean-half, iv.Mean+half
	return iv
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// Quantile is the q-quantile of x by linear interpolation between order statistics (DuckDB's
// quantile_cont, R's type 7): x sorted, h = (N − 1)·q, x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]).
// NaN for no values.
func Quantile(x []float64, q float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	h := float64(len(s)-1) * q
	lo := int(math.Floor(h))
	if lo+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[lo] + float64((h-float64(lo))*(s[lo+1]-s[lo]))
}

// Dist is the mean, p90 and max of some values (NaN for none).
type Dist struct {
	N              int
	Mean, P90, Max float64
}

// Describe is the Dist of x.
func Describe(x []float64) Dist {
	d := Dist{N: len(x), Mean: math.NaN(), P90: math.NaN(), Max: math.NaN()}
	if d.N == 0 {
		return d
	}
	d.Mean, d.P90, d.Max = mean(x), Quantile(x, 0.9), slices.Max(x)
	return d
}

// Spikes counts a run's grad-norm spikes: the steps whose grad norm is above 2× and above 5× the
// median of the run's steps, and the max/median ratio (NaN with no steps or a median of 0).
type Spikes struct {
	Steps                      int
	Median, Max, MaxOverMedian float64
	Above2, Above5             int
}

// CountSpikes is the Spikes of one run's per-step grad norms.
func CountSpikes(g []float64) Spikes {
	s := Spikes{Steps: len(g), Median: Quantile(g, 0.5), Max: math.NaN(), MaxOverMedian: math.NaN()}
	if s.Steps == 0 {
		return s
	}
	s.Max = slices.Max(g)
	if s.Median > 0 {
		s.MaxOverMedian = s.Max / s.Median
	}
	for _, v := range g {
		if v > 2*s.Median {
			s.Above2++
		}
		if v > 5*s.Median {
			s.Above5++
		}
	}
	return s
}

// Fit is an ordinary least-squares line measured = Intercept + Slope·predicted over N points,
// with its R², and R2Identity: the share of the measured ratios' variance that the prediction
// itself (measured = predicted, no fitted line) explains, 1 − Σ(m − p)² / Σ(m − m̄)² (negative
// when the prediction is worse than the mean).
type Fit struct {
	N                                   int
	Slope, Intercept, R2, R2Identity    float64
	MeanPredicted, MeanMeasured, MaxRel float64 // MaxRel: the largest |m − p| / p
}

// FitLine fits measured y on predicted x, skipping pairs where either is not finite.
func FitLine(x, y []float64) Fit {
	var xs, ys []float64
	for i := range x {
		if finite(x[i]) && finite(y[i]) {
			xs, ys = append(xs, x[i]), append(ys, y[i])
		}
	}
	f := Fit{N: len(xs), Slope: math.NaN(), Intercept: math.NaN(), R2: math.NaN(), R2Identity: math.NaN(),
		MeanPredicted: math.NaN(), MeanMeasured: math.NaN(), MaxRel: math.NaN()}
	if f.N == 0 {
		return f
	}
	mx, my := mean(xs), mean(ys)
	f.MeanPredicted, f.MeanMeasured = mx, my
	var sxx, sxy, syy, sres float64
	f.MaxRel = 0
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		// Each product rounded before the sum (float64(…)): a fused multiply-add would change
		// the last bit between GOAMD64 levels.
		sxx += float64(dx * dx)
		sxy += float64(dx * dy)
		syy += float64(dy * dy)
		sres += float64((ys[i] - xs[i]) * (ys[i] - xs[i]))
		f.MaxRel = math.Max(f.MaxRel, math.Abs(ys[i]-xs[i])/xs[i])
	}
	if syy > 0 {
		f.R2Identity = 1 - sres/syy
	}
	if f.N >= 2 && sxx > 0 {
		f.Slope = sxy / sxx
		f.Intercept = my - f.Slope*mx
		if syy > 0 {
			f.R2 = float64(sxy*sxy) / float64(sxx*syy)
		}
	}
	return f
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
