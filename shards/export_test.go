package shards

// Fallbacks is how many reads of r took OpenColumns and ReadKeys.
func (r *KeyReader) Fallbacks() int { return r.fallbacks }

// ThriftSize is thriftSize, for the tests of package shards_test.
var ThriftSize = thriftSize
