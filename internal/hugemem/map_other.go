//go:build !linux || race

package hugemem

// mapHuge maps nothing on this platform, and under the race detector (which does not see
// memory outside the Go heap): buffers come from the Go heap.
func mapHuge(int) (whole, b []byte) { return nil, nil }

func unmap([]byte) {}
