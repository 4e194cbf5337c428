//go:build !unix

package model

func processCPU() float64 { return 0 }
