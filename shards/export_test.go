package shards

// Fallbacks is how many reads of r took OpenColumns and ReadKeys.
func (r *KeyReader) Fallbacks() int { return r.fallbacks }
