package ablate

import "github.com/drmas-dev/drmas/shards"

// SummaryRow is the persisted schema shards.SummaryRow, named here for this package's callers.
type SummaryRow = shards.SummaryRow
