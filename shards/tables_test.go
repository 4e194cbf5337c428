package shards_test

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/drmas-dev/drmas/shards"
)

// TestTableSchemaRootNames: the Go type name of a persisted table is its Parquet schema's root
// name, written into every file, so moving a type must keep its name (and renaming one changes
// the stored bytes). Each table is encoded and its file's root name read back.
func TestTableSchemaRootNames(t *testing.T) {
	check := func(want string, data []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if got := f.Metadata().Schema[0].Name; got != want {
			t.Errorf("root name %q, want %q", got, want)
		}
	}
	d, err := shards.EncodeTable([]shards.DiagnosticsRow{{Agent: "a"}})
	check("DiagnosticsRow", d, err)
	d, err = shards.EncodeTable([]shards.MetricsRow{{Agent: "*"}})
	check("MetricsRow", d, err)
	d, err = shards.EncodeTable([]shards.ResultRow{{DataSource: "all"}})
	check("ResultRow", d, err)
	d, err = shards.EncodeTable([]shards.PromptRow{{TaskID: "t"}})
	check("PromptRow", d, err)
	d, err = shards.EncodeTable([]shards.SummaryRow{{Agent: "*"}})
	check("SummaryRow", d, err)
}
