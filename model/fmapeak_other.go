//go:build !amd64 || purego

package model

func fmaProbeAVX2() *fmaProbe   { return nil }
func fmaProbeAVX512() *fmaProbe { return nil }
