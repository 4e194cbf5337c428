//go:build !amd64 || purego

package model

import "math"

// hasAVX2FMA is false without the assembly kernels.
const hasAVX2FMA = false

func geluVec(x, y []float32)     { geluRef(x, y) }
func geluBwdVec(x, dy []float32) { geluBackwardRef(x, dy) }

func expVec(x []float32) { expRef(x) }

func lnRowVec(x, g, b, y, xhat []float32) float32 { return lnRowRef(x, g, b, y, xhat) }

func lnRowBwdVec(dy, xhat, g, dx []float32, rstd float32) { lnRowBwdRef(dy, xhat, g, dx, rstd) }

func addVec(x, y []float32) int { return 0 }

func swigluVec(g, u, a []float32)             { swigluRef(g, u, a) }
func swigluBwdVec(g, u, da, dg, du []float32) { swigluBackwardRef(g, u, da, dg, du) }

func logitGradVec(z, p, dz []float32, dlp, de, invT, lse, H float64) {
	logitGradRef(z, p, dz, dlp, de, invT, lse, H)
}

func scaledMaxVec(z []float32, invT float64, lanes *[8]float64) {
	m := scaledMaxRef(z, invT)
	for i := range lanes {
		lanes[i] = m
	}
}

func shiftScaledVec(z []float32, invT, mx float64, e []float32) { shiftScaledRef(z, invT, mx, e) }

func probsFromExpVec(z []float32, invT float64, st softmaxStat, e []float32) {
	probsFromExpRef(z, invT, st, e)
}

func maxVec(x []float32) (float32, int)   { return float32(math.Inf(-1)), 0 }
func subVec(x []float32, v float32) int   { return 0 }
func scaleVec(x []float32, f float32) int { return 0 }
